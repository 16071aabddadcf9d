"""macOS, WSL2 and native Windows read from what their tools print (tests/nodes/fixtures/platforms/): the probe's and
the sampler's macOS shell runs here for real, its tools answering from the recordings (nodes/simlan/systems.py); WSL's
kernel lines and Windows' shells' answers go through the panel's readers."""

import subprocess
from pathlib import Path

import pytest
from django.template.loader import render_to_string

from nodes.metrics import sampler
from nodes.probing import platforms, power, probe
from nodes.runtime import install
from nodes.simlan import systems as simos

FIXTURES = Path(__file__).parent / "fixtures" / "platforms"
MANIFEST = {"os": "linux", "arch": "x86_64", "min_glibc": "2.35", "min_glibcxx": "3.4.30"}
GiB = 2**30


def mac_bin(tmp_path: Path, name: str, without: tuple[str, ...] = ()) -> Path:
    return simos.write_bin(tmp_path / name, FIXTURES / f"{name}.txt", hidden=simos.NOT_ON_A_MAC, without=without)


def probed(tmp_path: Path, folder: Path) -> dict:
    said = subprocess.run(["sh", "-c", probe.SCRIPT, "sh", str(tmp_path / "install")], capture_output=True,
                          text=True, env={"PATH": str(folder), "HOME": str(tmp_path)}, timeout=30)
    assert said.stderr == "", said.stderr
    return probe.parse(dict(line.split("=", 1) for line in said.stdout.splitlines() if "=" in line))


def recorded_raw(name: str) -> dict:
    """A WSL laptop's probe answers, as its kernel and os-release say them."""
    said = simos.recorded(FIXTURES / f"{name}.txt")
    distro = next((line.split("=", 1)[1].strip('"') for line in said.get("cat /etc/os-release", "").splitlines()
                   if line.startswith("PRETTY_NAME=")), "")
    return {"os": "Linux", "kernel": said["uname -r"].strip(), "proc_version": said["cat /proc/version"].strip(),
            "distro": distro}


def test_an_apple_silicon_mac_is_probed_through_its_own_tools(tmp_path):
    facts = probed(tmp_path, mac_bin(tmp_path, "macbook-air-m2"))
    assert (facts["os"], facts["arch"], facts["platform"], facts["cpu_model"]) == ("Darwin", "arm64", "macOS 14.5",
                                                                                   "Apple M2")
    assert (facts["physical_cores"], facts["logical_cores"], facts["performance_cores"]) == (8, 8, 4)
    assert facts["ram_total"] == 16 * GiB
    assert facts["ram_available"] == (5513 + 298744 + 2875) * 16384, "free, inactive and speculative pages"
    assert (facts["swap_total"], facts["swap_used"]) == (1024 * 2**20, int(312.25 * 2**20))
    assert (facts["memory_pressure"], facts["memory_free_percent"]) == ("normal", 62)
    assert (facts["battery_state"], facts["battery_percent"], facts["battery_status"]) == ("on battery", 83,
                                                                                        "Discharging")
    assert (facts["nic"], facts["link_kind"], facts["cpu_speed_limit"]) == ("en0", "wifi", None)
    assert power.battery_flag(facts, None)["text"] == "on battery 83%" and power.cpu_flag(facts, None) is None
    assert facts["missing_tools"] == [] and facts["wsl"] is None


def test_an_intel_mac_says_its_cpu_features_its_throttling_and_its_memory_pressure(tmp_path):
    facts = probed(tmp_path, mac_bin(tmp_path, "macbook-pro-intel"))
    assert facts["cpu_flags"] == ["sse4_2", "avx", "avx2", "fma", "f16c"], "AVX1.0, SSE4.2: Linux's names"
    assert (facts["cpu_mhz"], facts["logical_cores"], facts["performance_cores"]) == (2600, 12, None)
    assert facts["ram_available"] == (24412 + 1493014 + 11237) * 4096
    assert (facts["memory_pressure"], facts["cpu_speed_limit"]) == ("warning", 62)
    assert (facts["battery_state"], facts["battery_percent"]) == ("charging", 91)
    assert (facts["nic"], facts["link_kind"]) == ("en7", "wired"), "a USB Ethernet adapter, not its Wi-Fi"
    assert power.cpu_flag(facts, None)["text"] == "CPU held to 62% of its speed by macOS"
    page = render_to_string("nodes/facts.html", {"facts": facts})
    assert "macOS 14.4.1" in page and "memory pressure warning (14% free)" in page
    assert "CPU speed limit 62%: throttled" in page


def test_a_mac_gets_no_bundle_and_is_offered_its_own_build(tmp_path):
    facts = probed(tmp_path, mac_bin(tmp_path, "macbook-air-m2"))
    said = "; ".join(install.problems(facts, MANIFEST))
    assert "it runs macOS 14.5, and there is no macOS bundle" in said and "with Metal on Apple silicon" in said


def test_a_mac_without_its_own_tools_is_told_in_words(tmp_path):
    facts = probed(tmp_path, mac_bin(tmp_path, "macbook-air-m2", without=("vm_stat", "sysctl")))
    assert facts["missing_tools"] == ["sysctl", "vm_stat"] and facts["ram_total"] is None
    problem = platforms.mac_problem(facts)
    assert "does not answer `sysctl` or `vm_stat`" in problem and "/usr/sbin/sysctl, /usr/bin/vm_stat" in problem
    assert "PATH" in problem
    assert platforms.mac_problem(probed(tmp_path, mac_bin(tmp_path, "macbook-pro-intel"))) == ""


def test_a_macs_samples_come_from_the_same_reader_as_linuxs(tmp_path):
    stream = subprocess.Popen(["sh", "-c", sampler.SCRIPT, "sh", "1"], stdout=subprocess.PIPE, text=True,
                              env={"PATH": str(mac_bin(tmp_path, "macbook-air-m2"))})
    feed, sample, lines = sampler.Sampler(), None, []
    try:
        while sample is None:
            lines.append(stream.stdout.readline().rstrip("\n"))
            sample = feed.feed(lines[-1])
    finally:
        stream.kill()
        stream.wait()
    assert lines[1:9] == ["MemTotal: 16777216 kB", "MemAvailable: 4914112 kB", "SwapTotal: 1048576 kB",
                          "SwapFree: 728832 kB", "Net 21734561232 1934812734", "Bat 83|Discharging|0",
                          "CpuBusy 20.83", "E"]
    assert sample["battery"] == {"state": "on battery", "percent": 83, "note": ""}
    assert (sample["cpu"], sample["cores"], sample["ram_total"]) == (20.8, [], 16 * GiB), "top's second sample"
    assert sample["ram_used"] == 16 * GiB - 4914112 * 1024 and (sample["rx"], sample["tx"]) == (0, 0)


def test_a_macs_busy_share_is_taken_as_it_is_and_its_bytes_become_rates():
    feed = sampler.Sampler()
    for line in ["T 10", "MemTotal: 100 kB", "MemAvailable: 40 kB", "Net 1000 500", "CpuBusy 93.75", "E",
                 "T 12", "MemTotal: 100 kB", "MemAvailable: 30 kB", "Net 5000 900", "CpuBusy 12.5"]:
        assert feed.feed(line) is None
    sample = feed.feed("E")
    assert (sample["cpu"], sample["rx"], sample["tx"], sample["ram_used"]) == (12.5, 2000, 200, 70 * 1024)


@pytest.mark.parametrize(("name", "version", "platform"), [
    ("wsl2-ubuntu", 2, "Windows (WSL2) · Ubuntu 22.04.4 LTS"),
    ("wsl1-ubuntu", 1, "Windows (WSL1)"),
])
def test_wsl_is_recognised_from_its_kernel(name, version, platform):
    raw = recorded_raw(name)
    assert platforms.wsl_version(raw) == version
    assert platforms.wsl_version({**raw, "proc_version": ""}) == version, "uname -r alone is enough"
    assert platforms.platform_name(raw) == platform
    assert platforms.wsl_version({"kernel": "6.1.0-21-amd64", "proc_version": "Linux version 6.1.0-21-amd64"}) is None


def test_wsl2s_memory_is_said_to_be_the_virtual_machines_and_its_bundle_fits():
    facts = probe.parse({**recorded_raw("wsl2-ubuntu"), "arch": "x86_64", "meminfo_MemTotal": "8029624"})
    assert facts["wsl"] == 2 and facts["ram_total"] == 8029624 * 1024
    assert ".wslconfig" in facts["ram_note"] and "half of the Windows laptop's RAM" in facts["ram_note"]
    assert install.problems(facts, MANIFEST) == []
    page = render_to_string("nodes/facts.html", {"facts": facts})
    assert "Windows (WSL2) · Ubuntu 22.04.4 LTS" in page and "wslconfig" in page


def test_wsl1_is_sent_to_wsl2():
    facts = probe.parse({**recorded_raw("wsl1-ubuntu"), "arch": "x86_64"})
    assert "`wsl --set-version <distribution> 2`" in "; ".join(install.problems(facts, MANIFEST))


@pytest.mark.parametrize("name", ["windows-cmd", "windows-powershell", "windows-ver"])
def test_windows_own_shells_are_recognised(name):
    assert platforms.windows_login((FIXTURES / f"{name}.txt").read_text(), 1)


def test_windows_is_recognised_in_any_language_and_a_unix_shell_on_windows_too():
    german = "Der Befehl \"sh\" ist entweder falsch geschrieben oder\r\nkonnte nicht gefunden werden.\r\n"
    assert platforms.windows_login(german, 9009), "cmd.exe's own status for an unknown command"
    assert platforms.windows_login("", 0, "MINGW64_NT-10.0-22631"), "Git Bash"
    assert not platforms.windows_login("sh: 1: true: not found\n", 127, "Linux")
    assert not platforms.windows_login("", 0, "Darwin")
    refusal = platforms.windows_refusal("10.0.0.5")
    assert "WSL2" in refusal and "wsl --install -d Ubuntu" in refusal and "sudo apt install openssh-server" in refusal
