"""The doctor explains what is wrong with a laptop, in plain words, with the fix."""

from datetime import timedelta

from django.utils import timezone

from nodes.models import ActionKind, LinkCheck, Node, NodeStatus, Probe, RpcServer, ServerStatus
from nodes.probing.doctor import ERROR, OK, WARN, diagnose
from tests.conftest import PASSWORD
from tests.nodes.laptops import register, run_now

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJRvvesEHT9Lj/odiUekLSyxfHkxh+kIRGnuGyJVpB1/"
TROUBLED = {
    "os": "Linux", "arch": "x86_64", "glibc": "2.35", "glibcxx": "3.4.30", "cpu_model": "Intel Core i5-3320M",
    "cpu_flags": ["sse4_2", "avx"], "ram_total": 8 * 2**30, "ram_available": 1 * 2**30, "ram_limit": None,
    "swap_used": 2 * 2**30, "on_ac": False, "battery_percent": 40, "temperature_c": 92.0,
    "disk_rotational": True, "clock_offset_s": 42.0, "link_speed_mbps": 1000, "wireless": True,
}


def by_title(findings, words):
    return [finding for finding in findings if words in finding.title]


def test_it_finds_every_trouble_a_laptop_has_and_says_how_to_fix_it(db, runtime_bundle):
    node = Node.objects.create(name="old", host="10.0.0.9", username="u", host_key=KEY, runtime="0" * 12)
    Probe.objects.create(node=node, facts=TROUBLED)
    LinkCheck.objects.create(node=node, report={"rtt_median_ms": 3.1, "rtt_p99_ms": 20, "to_laptop_mb_s": 9,
                                                "from_laptop_mb_s": 11}, warnings=["Throughput is 9 MB/s ..."])
    RpcServer.objects.create(node=node, port=50052, status=ServerStatus.FAILED, last_death="exited with status 1")
    findings = diagnose(node, runtime_bundle)
    expected = ["No AVX2", "RAM free", "swap in use", "battery", "Hot", "Spinning", "Network", "Clock",
                "Runtime differs", "rpc-server on port 50052"]
    for words in expected:
        found = by_title(findings, words)
        assert found, f"nothing about {words!r}"
        assert found[0].level in (WARN, ERROR) and found[0].fix, words


def test_it_refuses_a_laptop_too_old_for_the_runtime(db, runtime_bundle):
    node = Node.objects.create(name="ancient", host="10.0.0.8", username="u", host_key=KEY)
    Probe.objects.create(node=node, facts={**TROUBLED, "glibc": "2.31"})
    finding = by_title(diagnose(node, runtime_bundle), "cannot run the runtime")[0]
    assert finding.level == ERROR and "2.31" in finding.detail


def test_it_gives_a_healthy_simulated_laptop_a_clean_bill(lan, db, runtime_bundle):
    the_lan = lan(3)
    node = register(the_lan, the_lan.laptops[1], name="healthy")
    for kind in (ActionKind.PROBE, ActionKind.NETWORK_CHECK, ActionKind.INSTALL_RUNTIME):
        assert run_now(node, kind).status == "succeeded"
    node.refresh_from_db()
    findings = diagnose(node, runtime_bundle)
    assert node.status == NodeStatus.READY
    # This machine's own disk spins; that warning is true of the simulated laptop too.
    assert {f.title for f in findings if f.level != OK} <= {"Spinning hard disk"}
    assert by_title(findings, "Runtime matches the head")
    assert by_title(findings, "CPU has AVX2")


def test_it_shows_the_doctor_page_to_an_admin(client, alice, db):
    Node.objects.create(name="n1", host="10.0.0.7", username="u", host_key=KEY)
    client.login(username="alice", password=PASSWORD)
    page = client.get("/nodes/doctor/")
    assert page.status_code == 200 and b"Not probed yet" in page.content
    assert client.get("/nodes/n1/doctor/").status_code == 200


def test_it_shows_the_tensor_cache_size_and_how_to_reclaim_it(db, runtime_bundle):
    node = Node.objects.create(name="warm", host="10.0.0.7", username="u", host_key=KEY, cache_cap=40 * 2**30)
    Probe.objects.create(node=node, facts={**TROUBLED, "rpc_cache": 3 * 2**30})
    finding = by_title(diagnose(node, runtime_bundle), "tensor cache")[0]
    assert "3.0 GiB" in finding.title and "40.0 GiB, set by hand" in finding.detail
    assert "Clean now" in finding.fix


def test_it_warns_when_the_laptops_disk_is_nearly_full_by_its_newest_reading(db, runtime_bundle):
    node = Node.objects.create(name="full", host="10.0.0.7", username="u", host_key=KEY)
    Probe.objects.create(node=node, facts={**TROUBLED, "disk_free": 1 * 2**30, "disk_total": 500 * 2**30})
    finding = by_title(diagnose(node, runtime_bundle), "Disk nearly full")[0]
    assert finding.level == WARN and "1.0 GiB free of 500.0 GiB" in finding.title and "Clean the cache" in finding.fix
    node.probes.update(facts={**TROUBLED, "disk_free": 20 * 2**30, "disk_total": 500 * 2**30})
    assert by_title(diagnose(node, runtime_bundle), "Disk nearly full"), "4% free of a large disk"
    node.probes.update(facts={**TROUBLED, "disk_free": 30 * 2**30, "disk_total": 500 * 2**30})
    assert not by_title(diagnose(node, runtime_bundle), "Disk nearly full"), "6% free, and 30 GiB"
    node.cache_state = {"checked": (timezone.now() + timedelta(minutes=1)).isoformat(), "free": 2**30 // 2,
                        "disk": 500 * 2**30, "cache": 29 * 2**30}
    finding = by_title(diagnose(node, runtime_bundle), "Disk nearly full")[0]
    assert "512 MiB free" in finding.title and "29.0 GiB" in finding.detail, "the cache's newer listing counts"


def test_it_tells_an_admin_whose_laptop_reports_amx_that_rpc_server_does_not_use_it(db, runtime_bundle):
    node = Node.objects.create(name="xeon", host="10.0.0.7", username="u", host_key=KEY)
    flags = ["sse4_2", "avx", "avx2", "avx512f", "amx_tile", "amx_int8", "amx_bf16"]
    Probe.objects.create(node=node, facts={**TROUBLED, "cpu_model": "Intel Xeon Platinum 8480+", "cpu_flags": flags})
    finding = by_title(diagnose(node, runtime_bundle), "CPU has AVX2")[0]
    assert finding.level == OK and "AMX" in finding.detail and "never uses" in finding.detail
    without = [flag for flag in flags if not flag.startswith("amx")]
    node.probes.all().delete()
    Probe.objects.create(node=node, facts={**TROUBLED, "cpu_flags": without})
    assert "AMX" not in by_title(diagnose(node, runtime_bundle), "CPU has AVX2")[0].detail


def test_it_warns_about_nonsense_from_the_battery_a_cgroup_limit_and_a_laptop_it_cannot_keep_awake(db):
    node = Node.objects.create(name="lab", host="10.0.0.6", username="u", host_key=KEY)
    Probe.objects.create(node=node, facts={**TROUBLED, "on_ac": None, "battery_state": None, "battery_percent": None,
                                           "battery_note": "the battery's charge reads 'abc', not a percent from 0 "
                                                           "to 100", "cpu_quota_cores": 0.5})
    RpcServer.objects.create(node=node, port=50052, status=ServerStatus.RUNNING, local_port=40000,
                             awake="cannot keep awake: systemd-inhibit refused (Failed to connect to bus)")
    findings = diagnose(node, None)
    assert not by_title(findings, "Running on battery"), "unknown is not on battery"
    assert "'abc'" in by_title(findings, "battery's readings make no sense")[0].detail
    assert by_title(findings, "CPU held to 0.5 cores by a cgroup")[0].level == WARN
    asleep = by_title(findings, "cannot keep the laptop awake")[0]
    assert asleep.level == WARN and "logind" in asleep.fix and "Failed to connect to bus" in asleep.detail


# /proc/cpuinfo's "Features" of a Raspberry Pi 5 (Cortex-A76) and of a Pi 4 (Cortex-A72), as Linux prints them.
PI5_FEATURES = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp"
PI4_FEATURES = "fp asimd evtstrm crc32 cpuid"


def test_an_arm_laptop_is_judged_by_arm_features_not_by_avx2():
    from nodes.probing.doctor import cpu_features
    from nodes.probing.probe import parse

    pi5 = parse({"arch": "aarch64", "cpu_model": "Cortex-A76", "cpu_flags": PI5_FEATURES})
    assert pi5["cpu_flags"] == ["asimd", "asimddp", "asimdhp", "fphp"]
    assert (cpu_features(pi5).level, cpu_features(pi5).title) == (OK, "CPU has NEON with dot product")
    pi4 = cpu_features(parse({"arch": "aarch64", "cpu_model": "Cortex-A72", "cpu_flags": PI4_FEATURES}))
    assert pi4.level == WARN and pi4.title == "No dot-product instructions (ARMv8.2) on this CPU" and pi4.fix
    mac = cpu_features({"arch": "arm64", "cpu_model": "Apple M2", "cpu_flags": ["asimd", "asimddp", "i8mm", "bf16"]})
    assert (mac.level, mac.title) == (OK, "CPU has NEON with dot product and int8 matrix")
