"""What each kind of NodeAction does. Raise ActionError to fail with a plain message."""

import time

from django.utils import timezone

from clusterpanel.kit.units import rate, size
from nodes.laptops import removal
from nodes.models import (
    ActionKind,
    ActionStatus,
    LinkCheck,
    Node,
    NodeAction,
    NodeStatus,
    Probe,
    RpcServer,
    ServerStatus,
)
from nodes.probing import devices, netcheck, platforms, probe, speed
from nodes.remote import ssh
from nodes.remote.transfer import TransferError
from nodes.runtime import build_here, install
from nodes.runtime.bundle import RuntimeNotFound
from nodes.servers import cache as rpccache
from nodes.servers import cleaning, rpcserver, serving

RESTART_WAIT_S = 60  # the supervisor restarts a server within seconds; a minute means it is not running


class ActionError(Exception):
    pass


def do_probe(action: NodeAction, node: Node) -> None:
    action.report("Asking the laptop about itself.")
    try:
        facts = probe.probe(node.ssh_target(), node.install_dir)
    except platforms.UnsupportedSystem as exc:
        raise ActionError(str(exc)) from None
    Probe.objects.create(node=node, facts=facts)
    node.set_status(NodeStatus.READY)
    ram = facts["ram_limit"] or facts["ram_total"] or 0
    action.report(f"{facts['cpu_model'] or facts['arch']}, {facts['logical_cores']} threads, {size(ram)} RAM")


def latest_facts(action: NodeAction, node: Node) -> dict:
    found = node.probes.first()
    if found is None:
        do_probe(action, node)
        found = node.probes.first()
    return found.facts


def do_install_runtime(action: NodeAction, node: Node) -> None:
    facts = latest_facts(action, node)
    try:
        bundle = install.bundle_for(facts)
    except RuntimeNotFound as exc:
        raise ActionError(str(exc)) from None
    try:
        installed = install.install_runtime(node.ssh_target(), node.install_dir, bundle, facts, action.report,
                                            replace_built=True)
    except (install.InstallRefused, TransferError) as exc:
        raise ActionError(str(exc)) from None
    node.runtime = installed.runtime_id or bundle.sha256[:12]
    node.save(update_fields=["runtime"])
    listed = record_devices(action, node)
    if listed:
        names = [f"{d['name']} ({d['description']}, {size(d['free'])} free)" if d["type"] != "cpu" else d["name"]
                 for d in listed.get("devices", [])]
        said = f"Devices: {', '.join(names)}." if names else listed.get("devices_error", "")
        action.report(f"{action.message} {said}".strip())
    action.report(path=installed.path, copied=installed.copied, repaired=installed.repaired,
                  sent=installed.sent, resumed_from=installed.resumed_from)


def record_devices(action: NodeAction, node: Node) -> dict:
    """What the laptop's runtime, just installed or built, sees joins its facts (plans read them); as listed."""
    listed = probe.runtime_devices(node.ssh_target(), node.install_dir)
    if listed:
        stale = ("devices", "devices_error", "runtime_protocol")
        facts = {key: value for key, value in latest_facts(action, node).items() if key not in stale}
        Probe.objects.create(node=node, facts={**facts, **listed})
    return listed


def do_build_runtime(action: NodeAction, node: Node) -> None:
    other = node.actions.filter(kind=ActionKind.BUILD_RUNTIME, status=ActionStatus.RUNNING).exclude(pk=action.pk)
    if other.exists():  # both would copy the source to the same file at once
        raise ActionError("The runtime is already being built on this laptop; wait for that build to end.")
    try:
        built = build_here.build_runtime(node.ssh_target(), node.install_dir, build_here.head_protocol(),
                                         action.report)
    except (build_here.BuildRefused, build_here.BuildFailed, RuntimeNotFound, TransferError) as exc:
        raise ActionError(str(exc)) from None
    node.runtime = built.plan.runtime_id
    node.save(update_fields=["runtime"])
    record_devices(action, node)
    names = ", ".join(f"{device.name} ({size(device.total)})" if device.total else device.name
                      for device in built.devices)
    said = (f"Built and checked on the laptop in {built.seconds:.0f} s" if built.rebuilt
            else f"Nothing rebuilt: its build for this source and these flags was checked in {built.seconds:.1f} s")
    action.report(f"{said}. Devices: {names}; RPC protocol {built.protocol}. It is now the laptop's runtime "
                  "(rpc-servers started from now on use it).", path=built.path, rebuilt=built.rebuilt,
                  seconds=round(built.seconds, 1), sent=built.sent, protocol=built.protocol, runtime=node.runtime,
                  devices=[device.as_fact() for device in built.devices])


def do_network_check(action: NodeAction, node: Node) -> None:
    action.report("Measuring round trips and throughput (about 8 s).")
    try:
        report = netcheck.check(node.ssh_target()).as_dict()
    except netcheck.NetCheckError as exc:
        raise ActionError(str(exc)) from None
    found = netcheck.warnings(report, latest_facts(action, node))
    LinkCheck.objects.create(node=node, report=report, warnings=found)
    action.report(f"RTT {report['rtt_median_ms']} ms median, {report['rtt_p99_ms']} ms p99; "
                  f"{report['to_laptop_mb_s']} MB/s to the laptop, {report['from_laptop_mb_s']} MB/s back"
                  + (f". {len(found)} warning(s)." if found else "."), **report)


def do_measure_speed(action: NodeAction, node: Node) -> None:
    """Each device the laptop's runtime lists, in turn, the CPU first: a device that fails is said, the others
    are still measured."""
    if not node.runtime:
        raise ActionError("Install the runtime first; the speed test runs on it.")
    latest_facts(action, node)  # probed first if it never was
    listed = devices.listed_devices(node)
    measured, failed = {}, {}
    for device in sorted(listed, key=lambda device: not device.is_cpu):
        action.report(f"Running the bundled model on the laptop's {device.name} for a few seconds.")
        try:
            result = speed.measure(node.ssh_target(), node.install_dir, device=device.name)
        except (speed.SpeedError, rpcserver.RpcServerError, ssh.SSHError) as exc:
            failed[device.name] = str(exc)
            continue
        measured[device.name] = result
        if device.is_cpu:
            node.speed_gb_s = result["bandwidth_gb_s"]
        else:
            node.device_speeds = {**node.device_speeds, device.name: result["bandwidth_gb_s"]}
        node.speed_measured_at = timezone.now()
        node.save(update_fields=["speed_gb_s", "device_speeds", "speed_measured_at"])
    if not measured:
        raise ActionError("The speed test failed: " + "; ".join(f"{name}: {why}" for name, why in failed.items()))
    said = "; ".join(f"{name}: {r['tokens_per_s']} tokens/s, about {rate(r['bandwidth_gb_s'])}" for name, r in
                     measured.items())
    not_measured = "".join(f" {name} could not be measured: {why}." for name, why in failed.items())
    action.report(f"On the bundled model, {said} of effective memory bandwidth.{not_measured}",
                  **(measured.get("CPU") or next(iter(measured.values()))), devices=measured, failed=failed)


def do_restart_servers(action: NodeAction, node: Node) -> None:
    """Asks the supervisor (the one that keeps servers running) to restart each wanted server, and waits until
    it has: restarting them here too would race it."""
    ports = sorted(node.rpc_servers.filter(wanted=True).values_list("port", flat=True))
    if not ports:
        action.report("No rpc-server runs here: nothing to restart.", ports=[])
        return
    ssh.run(node.ssh_target(), ["true"], timeout=rpcserver.quick_s())  # an unreachable laptop is asked nothing
    for port in ports:
        serving.want(node, port, "restart")
    action.report(f"Restarting the rpc-server{'s' if len(ports) > 1 else ''} on port "
                  f"{', '.join(map(str, ports))}.", ports=ports)
    deadline = time.monotonic() + RESTART_WAIT_S
    while (waiting := restarting(node, ports)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if waiting:
        raise ActionError(f"The supervisor did not restart port {', '.join(map(str, waiting))} within "
                          f"{RESTART_WAIT_S} s: is it running (manage.py supervise)?")
    action.report(f"Restarted port {', '.join(map(str, ports))}.")


def restarting(node: Node, ports: list[int]) -> list[int]:
    """The ports still being restarted; ActionError when the supervisor failed at one (it tries again later)."""
    waiting = []
    for server in RpcServer.objects.filter(node=node, port__in=ports):
        if server.status == ServerStatus.FAILED and server.next_try_at:  # want() cleared it: a failure since
            raise ActionError(f"Port {server.port} did not come back: {server.last_death.partition(chr(10))[0]}")
        if server.restart_requested or server.status != ServerStatus.RUNNING:
            waiting.append(server.port)
    return waiting


def do_clean_cache(action: NodeAction, node: Node) -> None:
    action.report("Listing the laptop's rpc cache.")
    who = action.requested_by.username if action.requested_by else "an admin"
    try:
        cleaned = cleaning.clean(node, f"asked by {who}")
    except (cleaning.CleanRefused, rpccache.CacheError) as exc:
        raise ActionError(str(exc)) from None
    state = cleaned.state
    action.report(cleaned.summary(), removed=cleaned.removed, freed=cleaned.freed, cache=state["cache"],
                  cap=state["cap"], free=state["free"], decide_s=round(cleaned.decide_s, 3),
                  remove_s=round(cleaned.remove_s, 3))


def do_remove(action: NodeAction, node: Node) -> None:
    wipe = bool(action.progress.get("wipe"))
    action.report(f"Stopping {node.name}'s rpc-servers{' and deleting its files' if wipe else ''}.")
    try:
        removed = removal.remove(node, wipe=wipe, acting=action)
    except removal.Refused as exc:
        raise ActionError(str(exc)) from None
    action.report(removed.summary(action.node_name), stopped=removed.stopped, wiped=removed.wiped,
                  **({"unreachable": True} if removed.unreachable else {}))


HANDLERS = {
    ActionKind.PROBE: do_probe,
    ActionKind.INSTALL_RUNTIME: do_install_runtime,
    ActionKind.BUILD_RUNTIME: do_build_runtime,
    ActionKind.NETWORK_CHECK: do_network_check,
    ActionKind.MEASURE_SPEED: do_measure_speed,
    ActionKind.RESTART_RPC: do_restart_servers,
    ActionKind.CLEAN_CACHE: do_clean_cache,
    ActionKind.REMOVE: do_remove,
}
