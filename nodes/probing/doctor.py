"""The seeds' troubleshooting table, run against what the panel knows about each laptop.

Pure: it reads stored facts (probe, link check, servers) and explains each
finding in plain words with the fix. "Check again" refreshes those facts.
"""

from dataclasses import dataclass
from datetime import datetime

from clusterpanel.kit.units import size
from nodes.models import Node, NodeStatus, ServerStatus
from nodes.probing import power
from nodes.runtime import install
from nodes.runtime.bundle import RuntimeBundle

GiB = 2**30
OK, WARN, ERROR = "ok", "warn", "error"
LOW_DISK = 2 * GiB  # less than the layers of a small model on one laptop
LOW_DISK_SHARE = 0.05  # file systems slow down and fragment past 95% full; ext4 keeps 5% for root anyway


@dataclass(frozen=True)
class Finding:
    level: str
    title: str
    detail: str = ""
    fix: str = ""


def ssh_access(node: Node) -> Finding:
    fixes = {
        NodeStatus.LOGIN_REFUSED: "Re-register the laptop with a key or password it accepts.",
        NodeStatus.HOST_KEY_CHANGED: "Compare the new fingerprint on the laptop, then approve it on this page.",
        NodeStatus.OFFLINE: "Check that the laptop is on, awake (no suspend on lid close) and on the LAN.",
    }
    if node.status in fixes:
        return Finding(ERROR, f"SSH: {node.get_status_display().lower()}", node.status_detail, fixes[node.status])
    return Finding(OK, "SSH login works", f"{node.username}@{node.host}, host key {node.host_key_fingerprint}")


def cpu_features(facts: dict) -> Finding:
    flags = facts.get("cpu_flags", [])
    if facts.get("arch") in ("aarch64", "arm64"):
        return arm_features(facts, flags)
    if "avx2" in flags:
        extra = " and AVX-512" if "avx512f" in flags else ""
        return Finding(OK, f"CPU has AVX2{extra}", facts.get("cpu_model", "") + amx_note(flags))
    return Finding(WARN, "No AVX2 on this CPU", f"{facts.get('cpu_model', '')}: matrix maths runs 3-8x slower.",
                   "Give this laptop fewer layers (the planner does when its speed is measured), or leave it out.")


def arm_features(facts: dict, flags: list[str]) -> Finding:
    """llama.cpp's quantized matrix maths on ARM wants the dot-product instructions (ARMv8.2: a Raspberry Pi 5,
    any Apple silicon); a Pi 4's Cortex-A72 lacks them."""
    model = facts.get("cpu_model", "") or facts.get("arch", "")
    if "asimddp" in flags:
        extra = "".join(f" and {name}" for flag, name in (("i8mm", "int8 matrix"), ("sve", "SVE")) if flag in flags)
        return Finding(OK, f"CPU has NEON with dot product{extra}", model)
    return Finding(WARN, "No dot-product instructions (ARMv8.2) on this CPU",
                   f"{model}: matrix maths runs 2-4x slower than on a Raspberry Pi 5's or a Mac's cores.",
                   "Give this laptop fewer layers (the planner does when its speed is measured), or leave it out.")


def amx_note(flags: list[str]) -> str:
    """AMX traps on some virtual CPUs that report it; on a laptop that cannot matter, and the admin may wonder."""
    if not any(flag.startswith("amx") for flag in flags):
        return ""
    return (". It reports AMX, which rpc-server never uses: it keeps weights in plain CPU buffers, and llama.cpp "
            "reaches its AMX kernels only through the repacked weights of the process that loads the model")


def memory(facts: dict) -> list[Finding]:
    found = []
    usable = facts.get("ram_limit") or facts.get("ram_available") or 0
    if usable < 2 * GiB:
        found.append(Finding(WARN, f"Only {size(usable)} of RAM free when probed",
                             "Little room for model layers after the OS and desktop.",
                             "Close browsers and other programs on the laptop, or log out of its desktop."))
    else:
        found.append(Finding(OK, f"{size(usable)} of RAM free when probed"))
    if (facts.get("swap_used") or 0) > 256 * 2**20:
        found.append(Finding(WARN, f"{size(facts['swap_used'])} of swap in use",
                             "Layers that land in swap make every token wait for the disk.",
                             "Free memory on the laptop or give it fewer layers; consider `swapoff -a` while serving."))
    if facts.get("memory_pressure") in ("warning", "critical"):  # macOS's own judgement, compression and swap together
        found.append(Finding(WARN, f"macOS reports {facts['memory_pressure']} memory pressure",
                             "The Mac is compressing and swapping memory: layers put there wait on both.",
                             "Quit apps on the Mac, or give it fewer layers."))
    return found


def power_and_heat(facts: dict) -> list[Finding]:
    found = []
    if facts.get("on_ac") is False or power.on_battery(facts):
        percent = facts.get("battery_percent")
        left = f"{percent}% left" if percent is not None else "its charge unknown"
        found.append(Finding(WARN, "Running on battery", f"{left}; laptops slow their CPU on battery.",
                             "Plug the laptop in."))
    if facts.get("battery_note"):
        found.append(Finding(WARN, "The battery's readings make no sense", facts["battery_note"],
                             "Its battery or its driver may be failing: check it in the laptop's own power settings."))
    if facts.get("cpu_quota_cores"):
        found.append(Finding(WARN, f"CPU held to {facts['cpu_quota_cores']:g} cores by a cgroup",
                             "Its layers take longer than the laptop's CPU could do them.",
                             "Lift the limit (systemd: CPUQuota= of the login's slice), or plan fewer layers on it."))
    temperature = facts.get("temperature_c")
    if temperature and temperature >= 85:
        found.append(Finding(WARN, f"Hot: {temperature:.0f} °C", "The CPU throttles when it is this hot.",
                             "Give it air: lid open, on a hard surface, or a cooling pad."))
    return found


def disk(facts: dict) -> list[Finding]:
    if facts.get("disk_rotational"):
        return [Finding(WARN, "Spinning hard disk", "Loading model data from it is slow (under 150 MB/s).",
                        "Keep the rpc-server cache on an SSD if the laptop has one.")]
    return []


def disk_space(node: Node, facts: dict, probed) -> list[Finding]:
    """Little free disk, by the newer of the probe and the cache's last listing: under LOW_DISK, or under
    LOW_DISK_SHARE of the disk. A pre-seed then fails for want of room, and the laptop's own programs with it."""
    state = node.cache_state or {}
    newer = state.get("checked") and (probed is None or datetime.fromisoformat(state["checked"]) > probed)
    free, total = (state.get("free"), state.get("disk")) if newer else (facts.get("disk_free"), facts.get("disk_total"))
    if free is None or (free >= LOW_DISK and not (total and free < total * LOW_DISK_SHARE)):
        return []
    of = f" of {size(total)}" if total else ""
    return [Finding(WARN, f"Disk nearly full: {size(free)} free{of}",
                    f"The rpc-server cache holds {size(state.get('cache', facts.get('rpc_cache') or 0))} of it; "
                    "a deployment's tensors need room there, and so does the laptop itself.",
                    "Clean the cache now on the laptop's page, or give it a smaller cap (Edit); else free space "
                    "on the laptop.")]


def tensor_cache(node: Node, facts: dict) -> list[Finding]:
    cached = (node.cache_state or {}).get("cache", facts.get("rpc_cache") or 0)
    if cached < 2**20:
        return []
    cap = f"{size(node.cache_cap)}, set by hand" if node.cache_cap else "a share of its disk"
    return [Finding(OK, f"rpc-server tensor cache holds {size(cached)}",
                    "Weights kept from earlier deployments, so that a redeploy sends only their hashes. Its cap is "
                    f"{cap}: past it, the least recently used files no deployment here needs are removed.",
                    "To reclaim space now: Clean now on the laptop's page, or a smaller cap (Edit).")]


def link(node: Node) -> list[Finding]:
    check = node.link_checks.first()
    if check is None:
        return [Finding(WARN, "Network not measured yet", fix="Run a network check.")]
    report = check.report
    summary = (f"RTT {report['rtt_median_ms']} ms median, {report['to_laptop_mb_s']} MB/s to it, "
               f"{report['from_laptop_mb_s']} MB/s back")
    if not check.warnings:
        return [Finding(OK, "Network is fine", summary)]
    return [Finding(WARN, "Network", f"{summary}. {warning}", "Then run the network check again to confirm.")
            for warning in check.warnings]


def clock(facts: dict) -> list[Finding]:
    offset = facts.get("clock_offset_s")
    if offset is not None and abs(offset) > 2:
        return [Finding(WARN, f"Clock is {offset:+.1f} s off the panel's", "Logs and charts will not line up.",
                        "Turn on time sync: `timedatectl set-ntp true`.")]
    return []


def runtime(node: Node, facts: dict, bundle: RuntimeBundle | None) -> list[Finding]:
    if bundle is None:
        return [Finding(ERROR, "No runtime bundle on the panel", fix="Run `make setup` on the panel's machine.")]
    if node.runtime.startswith("built-"):
        return [Finding(OK, "Runtime built on this laptop", "From the head's own llama.cpp source; it answered with "
                        f"the head's RPC protocol {bundle.rpc_protocol} when it was built.")]
    bundle = install.bundle_for(facts, bundle)
    reasons = install.problems(facts, bundle.manifest)
    if reasons:
        return [Finding(ERROR, "This laptop cannot run the runtime bundle", "; ".join(reasons) + ".",
                        f"{install.BUILD_HINT} (it needs a C/C++ compiler and cmake there), or use a 64-bit x86 "
                        "laptop with Ubuntu 22.04, Debian 12, Fedora 35 or newer.")]
    if not node.runtime:
        return [Finding(WARN, "Runtime not installed", fix="Install the runtime from this page.")]
    if node.runtime != bundle.sha256[:12]:
        return [Finding(WARN, "Runtime differs from the head's",
                        f"The laptop has {node.runtime}, the head {bundle.sha256[:12]}: protocols may differ.",
                        "Install the runtime again.")]
    return [Finding(OK, "Runtime matches the head", f"RPC protocol {bundle.rpc_protocol}")]


def servers(node: Node, bundle: RuntimeBundle | None) -> list[Finding]:
    found = []
    for server in node.rpc_servers.filter(wanted=True):
        if server.status != ServerStatus.RUNNING:
            found.append(Finding(ERROR, f"rpc-server on port {server.port} is {server.get_status_display().lower()}",
                                 server.last_death, "See its log on this page; the supervisor keeps retrying."))
        elif bundle and server.protocol and server.protocol.split(".")[0] != bundle.rpc_protocol.split(".")[0]:
            found.append(Finding(ERROR, f"rpc-server on port {server.port} speaks RPC {server.protocol}",
                                 f"The head speaks {bundle.rpc_protocol}; llama.cpp refuses other major versions.",
                                 "Install the runtime again and restart the server."))
        else:
            detail = f"reached at {server.endpoint}" + (f", restarted {server.restarts}×" if server.restarts else "")
            found.append(Finding(OK, f"rpc-server on port {server.port} is running", detail))
            found += awake(server)
    return found


def awake(server) -> list[Finding]:
    if not server.awake.startswith("cannot keep awake"):
        return []
    return [Finding(WARN, f"rpc-server on port {server.port} cannot keep the laptop awake", server.awake,
                    "Let systemd's logind run on the laptop (systemd-inhibit needs it), or set the laptop never to "
                    "sleep while plugged in.")]


def diagnose(node: Node, bundle: RuntimeBundle | None) -> list[Finding]:
    probe = node.probes.first()
    if probe is None:
        return [ssh_access(node), Finding(WARN, "Not probed yet", fix="Probe the laptop.")]
    facts = probe.facts
    return [ssh_access(node), cpu_features(facts), *memory(facts), *power_and_heat(facts), *disk(facts),
            *disk_space(node, facts, probe.created), *tensor_cache(node, facts),
            *link(node), *clock(facts), *runtime(node, facts, bundle), *servers(node, bundle)]
