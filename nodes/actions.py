"""What each kind of NodeAction does. Raise ActionError to fail with a plain message."""

from django.utils import timezone

from clusterpanel.units import size
from jobs.engine.llamacpp import LlamaCppError
from nodes import install, netcheck, probe, rpcserver, speed
from nodes.models import ActionKind, LinkCheck, Node, NodeAction, NodeStatus, Probe
from nodes.runtime import RuntimeNotFound, find_bundle
from nodes.transfer import TransferError


class ActionError(Exception):
    pass


def do_probe(action: NodeAction, node: Node) -> None:
    action.report("Asking the laptop about itself.")
    facts = probe.probe(node.ssh_target(), node.install_dir)
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
    try:
        bundle = find_bundle()
    except RuntimeNotFound as exc:
        raise ActionError(str(exc)) from None
    try:
        installed = install.install_runtime(node.ssh_target(), node.install_dir, bundle,
                                            latest_facts(action, node), action.report)
    except (install.InstallRefused, TransferError) as exc:
        raise ActionError(str(exc)) from None
    node.runtime = bundle.sha256[:12]
    node.save(update_fields=["runtime"])
    action.report(path=installed.path, copied=installed.copied, repaired=installed.repaired,
                  sent=installed.sent, resumed_from=installed.resumed_from)


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
    if not node.runtime:
        raise ActionError("Install the runtime first; the speed test runs on it.")
    action.report("Running the bundled model on the laptop for a few seconds.")
    try:
        result = speed.measure(node.ssh_target(), node.install_dir)
    except (LlamaCppError, rpcserver.RpcServerError) as exc:
        raise ActionError(f"The speed test failed: {exc}") from None
    node.speed_gb_s, node.speed_measured_at = result["bandwidth_gb_s"], timezone.now()
    node.save(update_fields=["speed_gb_s", "speed_measured_at"])
    action.report(f"{result['tokens_per_s']} tokens/s on the bundled model: about {result['bandwidth_gb_s']} GB/s "
                  "of effective memory bandwidth.", **result)


HANDLERS = {
    ActionKind.PROBE: do_probe,
    ActionKind.INSTALL_RUNTIME: do_install_runtime,
    ActionKind.NETWORK_CHECK: do_network_check,
    ActionKind.MEASURE_SPEED: do_measure_speed,
}
