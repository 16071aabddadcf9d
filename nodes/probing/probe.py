"""Ask a laptop what it is: CPU, memory, disk, network, power. Runs nodes/probing/probe.sh over SSH."""

import time
from pathlib import Path

from nodes.probing import devices, netcheck, platforms, power
from nodes.remote import ssh

SCRIPT = platforms.DARWIN + (Path(__file__).parent / "probe.sh").read_text()
INTERESTING_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                     "avx512_vbmi", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8",
                     # ARM, as Linux names them: NEON, dot product (ARMv8.2), int8 and bf16 matrix, SVE
                     "asimd", "asimddp", "asimdhp", "fphp", "i8mm", "bf16", "sve", "sve2")
NO_LIMIT = 2**62  # cgroup v1 writes a huge number for "unlimited"


def probe(target: ssh.SSHTarget, install_dir: str) -> dict:
    """The laptop's facts; platforms.UnsupportedSystem, in words, for a laptop the panel cannot serve as it is."""
    sent = time.time()
    result = ssh.sh(target, SCRIPT, ssh.remote_path(install_dir), timeout=30)
    received = time.time()
    raw = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    if platforms.windows_login(result.stdout + result.stderr, result.exit_status, raw.get("os", "")):
        raise platforms.UnsupportedSystem(platforms.windows_refusal(target.host))
    facts = parse(raw)
    if problem := platforms.mac_problem(facts):
        raise platforms.UnsupportedSystem(problem)
    facts["clock_offset_s"] = clock_offset(raw.get("clock", ""), (sent + received) / 2)
    facts["rtt_ms"] = netcheck.connect_rtt_ms(target)
    facts.update(runtime_devices(target, install_dir))
    return facts


def runtime_devices(target: ssh.SSHTarget, install_dir: str) -> dict:
    """The devices the installed runtime sees (none before the runtime is installed), or why it could not say."""
    try:
        found, protocol = devices.list_devices(target, devices.current_runtime(install_dir))
    except devices.NotInstalled:
        return {}
    except (devices.DevicesError, ssh.SSHError) as exc:  # the CPU is still known: the probe goes on
        return {"devices_error": str(exc)}
    return {"devices": [device.as_fact() for device in found], "runtime_protocol": protocol}


def clock_offset(remote: str, local: float) -> float | None:
    """Seconds the laptop's clock is ahead of the panel's (macOS's date has no %N: whole seconds)."""
    seconds, _, fraction = remote.partition(".")
    if not (seconds.isascii() and seconds.isdecimal()):
        return None
    remote_time = float(f"{seconds}.{fraction}") if fraction.isascii() and fraction.isdecimal() else float(seconds)
    return round(remote_time - local, 3)


def _int(raw: dict, key: str, scale: int = 1) -> int | None:
    value = raw.get(key, "").strip()
    return int(value) * scale if value.isascii() and value.lstrip("-").isdecimal() else None


def parse(raw: dict) -> dict:
    """Typed facts from the script's key=value lines; what a laptop cannot tell is None."""
    flags = raw.get("cpu_flags", "").split()
    ram_total = _int(raw, "meminfo_MemTotal", 1024)
    limit = _int(raw, "cgroup_memory_limit")
    if limit is not None and (limit >= NO_LIMIT or (ram_total and limit >= ram_total)):
        limit = None
    swap_total, swap_free = _int(raw, "meminfo_SwapTotal", 1024), _int(raw, "meminfo_SwapFree", 1024)
    temperature = _int(raw, "temperature_mc")
    return {
        **platforms.facts(raw),
        "os": raw.get("os", ""), "kernel": raw.get("kernel", ""), "arch": raw.get("arch", ""),
        "distro": raw.get("distro", ""), "hostname": raw.get("hostname", ""),
        "glibc": raw.get("glibc", ""), "glibcxx": raw.get("glibcxx", "").removeprefix("GLIBCXX_"),
        "userland_bits": _int(raw, "userland_bits"),
        "cpu_model": raw.get("cpu_model", ""),
        "physical_cores": _int(raw, "physical_cores"), "logical_cores": _int(raw, "logical_cores"),
        "cpu_flags": [flag for flag in INTERESTING_FLAGS if flag in flags],
        "cpu_mhz": _int(raw, "cpu_mhz"),
        "ram_total": ram_total, "ram_available": _int(raw, "meminfo_MemAvailable", 1024),
        "ram_limit": limit,
        "swap_total": swap_total,
        "swap_used": swap_total - swap_free if swap_total is not None and swap_free is not None else None,
        "disk_free": _int(raw, "disk_free_kb", 1024), "disk_total": _int(raw, "disk_total_kb", 1024),
        "rpc_cache": _int(raw, "rpc_cache_kb", 1024) or 0,
        "disk_rotational": {"1": True, "0": False}.get(raw.get("disk_rotational", "")),
        "nic": raw.get("nic", ""), "link_speed_mbps": _int(raw, "link_speed_mbps"),
        "wireless": {"1": True, "0": False}.get(raw.get("wireless", "")),
        "on_ac": {"1": True, "0": False}.get(raw.get("on_ac", "")),
        **battery_facts(raw), **cpu_clock_facts(raw),
        "link_kind": power.link_kind(raw.get("wireless", ""), raw.get("nic", "")),
        "temperature_c": temperature / 1000 if temperature else None,
        "gpu_vendors": raw.get("gpu_vendors", "").split(),
        "vulkan_loader": {"1": True, "0": False}.get(raw.get("vulkan_loader", "")),
        "nvidia_gpus": [gpu.strip() for gpu in raw.get("nvidia_gpus", "").split(";") if gpu.strip()],
    }


def battery_facts(raw: dict) -> dict:
    """The battery's state and charge (None, with a note, where it reads as nonsense); none without a battery."""
    if raw.get("battery") != "1":
        return {"battery_state": None, "battery_percent": None, "battery_note": "", "battery_status": ""}
    found = power.battery(raw.get("battery_percent", ""), raw.get("battery_status", ""), raw.get("on_ac", ""))
    return {**found.as_facts(), "battery_status": raw.get("battery_status", "")}


def cpu_clock_facts(raw: dict) -> dict:
    """The CPU's clock now and at most (kHz), and a cgroup's CPU limit with how often it held the CPU back."""
    return {"cpu_khz_now": _int(raw, "cpu_khz_now"), "cpu_khz_max": _int(raw, "cpu_khz_max"),
            "cpu_quota_cores": power.quota_cores(raw.get("cpu_quota", "")),
            "cpu_throttled_share": power.periods_share(raw.get("cpu_periods", ""))}
