"""A deployment's life: planned, preparing (runtime, rpc-servers, their tensor caches), loading, ready; and stopping.

Loading here is a verification load: llama.cpp loads the model across the
deployment's servers with the plan's `n_gpu_layers`/`tensor_split`, and the
layers must land where the plan says. The engine (jobs) keeps its own load.
"""

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import IntegrityError, transaction
from django.db.models import Q

from clusterpanel.kit import procs
from models_app.deploying import drafts
from models_app.llamacpp import oneshot
from models_app.llamacpp.libllama import LlamaCppError
from models_app.models import MAX_DRAFT_TOKENS, Deployment, DeploymentStage, DeploymentStatus, GgufModel
from models_app.planning import words as plan_words
from models_app.planning.planner import Plan, laptop_stages
from models_app.planning.records import PlanningError, as_record, make_plan
from nodes.models import Node, NodeStatus, RpcServer, ServerStatus
from nodes.probing import probe
from nodes.remote import ssh
from nodes.runtime import install
from nodes.runtime.bundle import RuntimeNotFound, find_bundle
from nodes.tasks import clean_soon

log = logging.getLogger(__name__)
FIRST_PORT = 50052
SERVERS_UP_WITHIN_S = 120
RUNTIMES_SIDE_BY_SIDE = 16  # laptops whose runtime is checked at once: each is a few SSH round trips
BEING_PREPARED = (DeploymentStatus.PREPARING, DeploymentStatus.LOADING)


class DeployError(Exception):
    pass


def create(model: GgufModel, nodes: list[Node], ctx: int, mode: str = "fastest", user=None,
           manual: list[int] | None = None, head_layers: bool = False, preseed: bool = True,
           slots: int | None = 1) -> Deployment:
    """Plan and record a deployment (raises PlanningError with numbers when nothing fits). `slots`: people
    served at once; None: the most of 8, 4, 2, 1 that fit."""
    plan = make_plan(model, nodes, ctx, mode, manual=manual, head_layers=head_layers, slots=slots)
    return record(model, plan, nodes, ctx, mode, user=user, preseed=preseed)


def record(model: GgufModel, plan: Plan, nodes: list[Node], ctx: int, mode: str = "fastest", user=None,
           preseed: bool = True, on_call: bool = False) -> Deployment:
    """A deployment of `plan` (made over `nodes`), planned and not yet prepared, with its stages."""
    with transaction.atomic():
        deployment = Deployment.objects.create(model=model, ctx=ctx, slots=plan.slots, mode=mode,
                                               plan=as_record(plan), created_by=user, preseed=preseed,
                                               on_call=on_call)
        record_stages(deployment, plan, nodes)
    return deployment


def record_stages(deployment: Deployment, plan: Plan, nodes: list[Node],
                  servers: dict[str, RpcServer] | None = None) -> list[str]:
    """A DeploymentStage per laptop of `plan` (keeping the rpc-servers in `servers`, by laptop name); the laptops'
    names in pipeline order."""
    by_name, servers = {node.name: node for node in nodes}, servers or {}
    for position, parts in enumerate(laptop_stages(plan)):
        name = parts[0].machine.name
        memory = {field: sum(getattr(part.memory, field) for part in parts) for field in vars(parts[0].memory)}
        devices = [{"device": part.machine.device, "first": part.first, "count": part.count,
                    "memory": vars(part.memory)} for part in parts]
        stage = deployment.stages.create(position=position, node=by_name[name], first_layer=parts[0].first,
                                         layer_count=sum(part.count for part in parts), memory=memory,
                                         devices=devices, server=servers.get(name))
        if stage.server_id:
            serve_devices(stage)
    return [parts[0].machine.name for parts in laptop_stages(plan)]


def serve_devices(stage: DeploymentStage) -> None:
    """The stage's server serves the stage's devices: told so, and restarted if it served others (STARTING until
    the supervisor has: the load waits for it). A server recorded before devices ([]) served the CPU."""
    devices = [part["device"] for part in stage.devices] or ["CPU"]
    server = RpcServer.objects.get(pk=stage.server_id)
    if (server.devices or ["CPU"]) != devices:
        RpcServer.objects.filter(pk=server.pk).update(devices=devices, restart_requested=True,
                                                      status=ServerStatus.STARTING)


def prepare(deployment: Deployment, measure_peak: bool = False) -> None:
    """Runtime on each laptop, one rpc-server each, then a verification load; FAILED with the reason otherwise.
    `measure_peak`: the verification fills the whole context, so the memory measured is the most a request
    can take (slow for big models: the whole context is processed once). A deployment is prepared once: a
    second call (a task delivered twice, two at once) finds it claimed and returns."""
    if not claim(deployment):
        return
    try:
        stages = list(deployment.stages.select_related("node"))
        ensure_runtimes([stage.node for stage in stages],
                        {stage.node_id: [part["device"] for part in stage.devices] for stage in stages})
        for stage in stages:
            start_server(stage)
        wait_for_servers(stages)
        if deployment.preseed:
            fill_caches(deployment, stages)
        deployment.set_status(DeploymentStatus.LOADING, "Loading the model across the laptops.")
        verify_load(deployment, stages, measure_peak)
        deployment.set_status(DeploymentStatus.READY, "Every layer is where the plan put it.")
    except DeployError as exc:
        stop(deployment, DeploymentStatus.FAILED, str(exc))
    except Exception as exc:  # whatever else: the deployment still ends, saying why
        log.exception("preparing %s failed", deployment)
        stop(deployment, DeploymentStatus.FAILED, f"Preparing failed unexpectedly: {exc}")
    finally:
        if not deployment.preseed:  # the rpc-servers cached what the load sent them (a pre-seed cleans itself)
            clean_soon([stage.node for stage in deployment.stages.select_related("node")],
                       f"after deployment #{deployment.pk} loaded")


def claim(deployment: Deployment) -> bool:
    """PLANNED to PREPARING, for this process only (a guarded update that also says who prepares it); False
    when another prepare has had it."""
    detail = "Installing the runtime and starting rpc-servers."
    if not Deployment.objects.filter(pk=deployment.pk, status=DeploymentStatus.PLANNED).update(
            status=DeploymentStatus.PREPARING, status_detail=detail, preparing_by=procs.this_process()):
        deployment.refresh_from_db()
        return False
    deployment.refresh_from_db(fields=["preparing_by"])
    deployment.set_status(DeploymentStatus.PREPARING, detail)  # written again, to tell the pages
    return True


def prepare_again(deployment: Deployment, detail: str) -> None:
    """Back to PREPARING in this process (recovery re-plans a deployment it did not claim)."""
    deployment.preparing_by = procs.this_process()
    deployment.save(update_fields=["preparing_by"])
    deployment.set_status(DeploymentStatus.PREPARING, detail)


def settle_interrupted() -> int:
    """Deployments left preparing or loading by a process of this machine that has ended (a worker killed by
    the OOM killer, Ctrl-C under make run): FAILED, their servers let go. Others' preparers are left alone:
    their liveness cannot be told from here. How many."""
    settled = 0
    mine = Deployment.objects.filter(status__in=BEING_PREPARED, preparing_by__startswith=f"{procs.this_machine()}:")
    for deployment in mine:
        why = procs.ended(deployment.preparing_by)
        if not why:
            continue
        detail = f"Interrupted: the process preparing it stopped ({why})."
        # Guarded: a deployment that moved on meanwhile (recovery took it over) keeps its state.
        if Deployment.objects.filter(pk=deployment.pk, status=deployment.status,
                                     preparing_by=deployment.preparing_by).update(status=DeploymentStatus.FAILED,
                                                                                  status_detail=detail):
            stop(deployment, DeploymentStatus.FAILED, detail)
            log.warning("%s: %s", deployment, detail)
            settled += 1
    return settled


def ensure_runtime(node: Node) -> None:
    ensure_runtimes([node])


def ensure_runtimes(nodes: list[Node], devices: dict[int, list[str]] | None = None) -> None:
    """The runtime on every laptop, checked and installed side by side, and the devices each must serve
    (`devices`, by laptop id) still there; one DeployError naming each laptop that cannot take part. One at a
    time, 39 laptops took most of a minute and the error named only the first."""
    try:
        bundle = find_bundle()
    except RuntimeNotFound as exc:
        raise DeployError(f"{nodes[0]}: {exc}") from None
    devices = devices or {}
    targets = [(node.ssh_target(), node.install_dir, devices.get(node.pk, [])) for node in nodes]  # no database
    with ThreadPoolExecutor(min(len(nodes), RUNTIMES_SIDE_BY_SIDE) or 1, thread_name_prefix="runtime") as pool:
        found = list(pool.map(lambda target: runtime_problem(*target, bundle), targets))
    failed = [f"{node}: {problem}" for node, (problem, _) in zip(nodes, found, strict=True) if problem]
    if len(failed) == 1:
        raise DeployError(failed[0])
    if failed:
        raise DeployError(f"{len(failed)} of {len(nodes)} laptops cannot take part: {'; '.join(failed)}")
    for node, (_, runtime) in zip(nodes, found, strict=True):
        Node.objects.filter(pk=node.pk).update(runtime=runtime)
        node.runtime = runtime


def runtime_problem(target: ssh.SSHTarget, install_dir: str, wanted: list[str], bundle) -> tuple[str, str]:
    """Why the laptop cannot take part now, in words ("" once it can), and the runtime it runs. SSH only: it
    runs in a thread."""
    try:
        facts = probe.probe(target, install_dir)
        bundle = install.bundle_for(facts, bundle)  # the bundle of the laptop's architecture
        installed = install.install_runtime(target, install_dir, bundle, facts, lambda *a, **k: None)
        seen = probe.runtime_devices(target, install_dir) if installed.copied or installed.repaired else facts
        listed = [device["name"] for device in seen.get("devices", [])]
    except install.InstallRefused as exc:
        return str(exc), ""
    except Exception as exc:  # SSH and transfer errors all stop the deployment the same way
        return f"could not install the runtime: {exc}", ""
    gone = [name for name in wanted if name not in (listed or ["CPU"])]
    if gone:
        lists = f"the laptop's runtime lists {', '.join(listed)}" if listed else "the laptop's runtime lists none"
        return (f"its {' and '.join(gone)}, planned to hold layers, {'is' if len(gone) == 1 else 'are'} no longer "
                f"there ({lists}); probe it and plan again", "")
    return "", installed.runtime_id or bundle.sha256[:12]


def start_server(stage: DeploymentStage) -> None:
    """The stage's rpc-server serving the stage's devices: the one it has while that is still wanted (restarted
    if it served other devices), else a new one on a free port."""
    if stage.server_id and RpcServer.objects.filter(pk=stage.server_id, wanted=True).exists():
        serve_devices(stage)
        return
    server = take_port(stage.node, [part["device"] for part in stage.devices] or ["CPU"])
    # The port is free again once an earlier deployment stopped: its stage lets go of the server row.
    DeploymentStage.objects.filter(server=server).exclude(pk=stage.pk).update(server=None)
    stage.server = server
    stage.save(update_fields=["server"])


def take_port(node: Node, devices: list[str]) -> RpcServer:
    """A server on the first port of the laptop that no wanted server holds, now wanted and ours alone: a row
    let go of is taken back with a guarded update, a new one made where none is (two deployments may start
    servers on one laptop at the same moment). It serves `devices`, told before the supervisor may start it."""
    fields = {"wanted": True, "status": ServerStatus.STARTING, "failures": 0, "next_try_at": None, "devices": devices}
    for port in range(FIRST_PORT, 65536):
        if RpcServer.objects.filter(node=node, port=port, wanted=False).update(**fields):
            return RpcServer.objects.get(node=node, port=port)
        try:
            with transaction.atomic():
                return RpcServer.objects.create(node=node, port=port, **fields)
        except IntegrityError:  # a wanted server holds this port
            continue
    raise DeployError(f"{node}: every port from {FIRST_PORT} up has an rpc-server already.")


def wait_for_servers(stages: list[DeploymentStage]) -> None:
    deadline = time.monotonic() + SERVERS_UP_WITHIN_S
    while time.monotonic() < deadline:
        servers = [RpcServer.objects.get(pk=stage.server_id) for stage in stages]
        if all(s.status == ServerStatus.RUNNING and s.endpoint for s in servers):
            return
        time.sleep(0.5)
    waiting = [f"{s.node}:{s.port} ({s.get_status_display().lower()}: {s.last_death or 'no answer'})"
               for s in servers if s.status != ServerStatus.RUNNING]
    raise DeployError(f"rpc-servers did not come up within {SERVERS_UP_WITHIN_S} s: {', '.join(waiting)}. "
                      "Is the supervisor running? (`make run` starts it.)")


def fill_caches(deployment: Deployment, stages: list[DeploymentStage]) -> None:
    from models_app.deploying import preseed  # here: web processes import this module and never copy weights

    deployment.set_status(DeploymentStatus.PREPARING, "Copying each laptop's share of the weights into its "
                          "rpc-server cache, so that the load sends only their hashes.")
    try:
        preseed.fill_caches(deployment, stages)
    except preseed.PreseedError as exc:
        raise DeployError(str(exc)) from None
    finally:
        clean_soon([stage.node for stage in stages], f"after deployment #{deployment.pk} filled it")


def endpoints(deployment: Deployment) -> list[str]:
    return [stage.server.endpoint for stage in deployment.stages.select_related("server", "server__node")]


def verify_load(deployment: Deployment, stages: list[DeploymentStage], measure_peak: bool = False) -> None:
    plan = deployment.plan
    expected = expected_devices(plan)
    try:
        answer = oneshot.complete(endpoints(deployment), "Hello", max_tokens=1, model=deployment.model.path,
                                  n_gpu_layers=plan["n_gpu_layers"], tensor_split=tuple(plan["tensor_split"]),
                                  ctx=deployment.ctx, slots=deployment.slots, timeout=1800,
                                  while_loaded=lambda pid: measure(stages, pid), fill_context=measure_peak)
    except LlamaCppError as exc:
        raise DeployError(f"llama.cpp could not load the model across the laptops: {exc}") from None
    placed = [answer["placement"].get(i) for i in range(len(expected))]
    if placed != expected:
        raise DeployError(f"llama.cpp placed the layers as {placed}, not as planned {expected}.")
    measured = answer.get("measured", {})
    measured["head"] = max(measured.get("head", 0) - answer["rss_before_load"], 0)
    deployment.plan = {**plan, "measured": measured, "measured_at_peak": measure_peak,
                       "allocated": allocated_by_machine(answer.get("buffers", {}), stages),
                       "allocated_by_device": answer.get("buffers", {})}
    deployment.save(update_fields=["plan"])


def allocated_by_machine(buffers: dict[str, dict[str, int]], stages: list[DeploymentStage]) -> dict[str, dict]:
    """llama.cpp's own account of what it allocated ("RPC0[10.0.0.2:50052]" → that laptop; CPU → the head)."""
    by_endpoint = {RpcServer.objects.get(pk=stage.server_id).endpoint: stage.node.name for stage in stages}
    found: dict[str, dict] = {}
    for device, kinds in buffers.items():
        endpoint = device.partition("[")[2].rstrip("]")
        machine = "head" if device == "CPU" else by_endpoint.get(endpoint)
        if machine:  # a laptop serving several devices: their buffers add up
            found[machine] = {kind: found.get(machine, {}).get(kind, 0) + size for kind, size in kinds.items()}
    return found


def expected_devices(plan: dict) -> list[str]:
    """The device llama.cpp must report for each layer (the output last): CPU for the head, RPCk for laptop k."""
    return ["CPU"] * plan["stages"][0]["count"] + [
        f"RPC{i}" for i, stage in enumerate(plan["stages"][1:]) for _ in range(stage["count"])]


def measure(stages: list[DeploymentStage], head_pid: int) -> dict[str, int]:
    """Resident memory while the model is loaded and has generated: each rpc-server, and the head."""
    found = {"head": oneshot.rss_bytes(head_pid)}
    for stage in stages:
        server = RpcServer.objects.get(pk=stage.server_id)
        try:
            rss = ssh.run(stage.node.ssh_target(), ["ps", "-o", "rss=", "-p", str(server.pid)]).stdout.strip()
        except ssh.SSHError:
            continue
        if rss.isdigit():
            found[stage.node.name] = int(rss) * 1024
    return found


def stop(deployment: Deployment, status: str = DeploymentStatus.STOPPED, detail: str = "") -> None:
    """Free every server (the supervisor stops it and closes its tunnel) and record why."""
    RpcServer.objects.filter(stage__deployment=deployment).update(wanted=False)
    deployment.set_status(status, detail or "Stopped; every rpc-server of it is being shut down.")




def make_default(deployment: Deployment) -> None:
    """The deployment the chat page and /v1/ offer first; refused (PlanningError) unless it takes jobs."""
    if deployment.status not in (DeploymentStatus.READY, DeploymentStatus.DEGRADED):
        raise PlanningError(f"{deployment} is {deployment.get_status_display().lower()}: only a deployment "
                            "that takes jobs can be the default.")
    with transaction.atomic():
        # Both rows held in id order first, as a door routing among replicas holds them: never a deadlock.
        rows = Deployment.objects.filter(Q(is_default=True) | Q(pk=deployment.pk)).select_for_update().order_by("pk")
        list(rows.values_list("pk", flat=True))
        Deployment.objects.filter(is_default=True).update(is_default=False)
        Deployment.objects.filter(pk=deployment.pk).update(is_default=True)
    deployment.is_default = True


def again(deployment: Deployment, ready_only: bool, user=None) -> Deployment:
    """A new deployment of the same model with the same settings, on the same laptops in the same order
    (`ready_only`: those of them that are ready now, re-planned); the old one is stopped if it still holds
    laptops, and passes its place as the chat's default on. Raises PlanningError, changing nothing."""
    nodes = [stage.node for stage in deployment.stages.select_related("node").order_by("position")]
    if ready_only:
        nodes = [node for node in nodes if node.status == NodeStatus.READY]
        if not nodes:
            raise PlanningError("None of its laptops is ready; bring one back or plan on others.")
    stages = deployment.plan.get("stages", [])
    head_layers = any(s.get("machine") == "head" and s.get("count") for s in stages)
    manual = per_laptop_counts(stages) if deployment.mode == "manual" and not ready_only else None
    mode = deployment.mode if manual or deployment.mode != "manual" else "fastest"  # a hand split fits no other set
    with transaction.atomic():
        fresh = create(deployment.model, nodes, deployment.ctx, mode, user=user, manual=manual,
                       head_layers=head_layers, preseed=deployment.preseed, slots=deployment.slots)
        # Copied as it is, not checked again: the old engine still holds the draft on the head, and one that no
        # longer fits is left out by the new engine, saying why on its page (jobs/engine/loaded_model.use_draft).
        Deployment.objects.filter(pk=fresh.pk).update(draft_tokens=deployment.draft_tokens,
                                                      draft_model=deployment.draft_model_id)
        fresh.draft_tokens, fresh.draft_model_id = deployment.draft_tokens, deployment.draft_model_id
        if deployment.is_active:
            stop(deployment, detail=f"Replaced by deployment #{fresh.pk}.")
        if deployment.is_default:
            Deployment.objects.filter(pk=deployment.pk).update(is_default=False)
            Deployment.objects.filter(pk=fresh.pk).update(is_default=True)
    return fresh


class DraftRefused(PlanningError):
    """A draft model that cannot draft for a deployment (drafts.refusal)."""


def set_drafting(deployment: Deployment, tokens: int, draft_model: GgufModel | None | str = "unchanged") -> None:
    """Speculative decoding, up to `tokens` drafted a step (0: off), by n-grams or by `draft_model` on the head.
    It changes neither the plan nor the laptops' memory, so its engine takes it within seconds, between two steps
    (jobs/engine/loop.py). PlanningError, with nothing changed, for a number out of range or a draft model that
    cannot draft for this deployment's model (drafts.refusal)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= MAX_DRAFT_TOKENS:
        raise PlanningError(f"Draft tokens must be a whole number from 0 (no drafting) to {MAX_DRAFT_TOKENS}; "
                            f"{tokens!r} is not.")
    changes = {"draft_tokens": tokens}
    if draft_model != "unchanged":
        chosen_again = draft_model is not None and draft_model.pk == deployment.draft_model_id  # loaded already
        why = draft_model and not chosen_again and drafts.refusal(deployment.model, draft_model, deployment.ctx,
                                                                   deployment.slots)
        if why:
            raise DraftRefused(why)
        changes["draft_model"] = draft_model
    Deployment.objects.filter(pk=deployment.pk).update(**changes)
    for name, value in changes.items():
        setattr(deployment, name, value)


def per_laptop_counts(stages: list[dict]) -> list[int]:
    """A recorded plan's layers for the head, then each laptop (its devices' stages added up): what a manual
    plan is asked with."""
    head = [stages[0]["count"]] if stages else []
    return head + [sum(stages[k]["count"] for k in run) for run in plan_words.laptop_runs(stages)]
