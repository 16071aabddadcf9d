"""The plan page: compare the modes for a model on chosen laptops, then deploy."""

from django import forms
from django.contrib import messages
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from clusterpanel.accounts.auth import lab_admin_required
from clusterpanel.kit import confirm
from clusterpanel.kit.idfields import IdChoiceField, IdMultipleChoiceField
from clusterpanel.kit.natural import natural_key
from models_app.deploying import deploy, drafts, jobs_above
from models_app.library import removal
from models_app.models import MAX_DRAFT_TOKENS, Deployment, DeploymentStatus, GgufModel, ModelStatus
from models_app.planning import planner
from models_app.planning import words as plan_words
from models_app.planning.records import (
    MAX_SLOTS,
    PlanningError,
    as_record,
    best_within_limit,
    laptops_to_watch,
    left_out_words,
    limit_words,
    machines_for,
    make_plan,
    people_at_once,
    why_these_slots,
)
from models_app.tasks import prepare_soon
from nodes.models import Node, NodeStatus, ServerStatus
from nodes.runtime import bundle as runtime

MODES = ("fastest", "memory", "even")
SLOTS_RANGE = f"Slots must be a whole number from 1 to {MAX_SLOTS}: how many people the model serves at once."


class PlanForm(forms.Form):
    model = IdChoiceField(GgufModel.objects.all(), empty_label=None)
    nodes = IdMultipleChoiceField(Node.objects.all(), widget=forms.CheckboxSelectMultiple, required=False,
                                           help_text="In pipeline order. None chosen: every ready laptop.")
    ctx = forms.IntegerField(min_value=64, max_value=1_048_576, initial=2048, label="Context (tokens)",
                             help_text="The most each person's conversation may hold.")
    slots = forms.IntegerField(
        min_value=1, max_value=MAX_SLOTS, required=False, label="Slots (people at once)",
        help_text="Requests the model serves at the same time, each with the whole context; each slot needs its "
                  "own KV cache. Empty: the most of 8, 4, 2 or 1 that fit.",
        error_messages={"min_value": SLOTS_RANGE, "max_value": SLOTS_RANGE, "invalid": SLOTS_RANGE})
    head_layers = forms.BooleanField(required=False, label="The panel's machine may hold layers too")
    mode = forms.ChoiceField(choices=[(m, m) for m in MODES], initial="fastest")
    preseed = forms.BooleanField(required=False, initial=True, label="Pre-seed the laptops' tensor caches",
                                 help_text="Copy each laptop's weights over SSH first, in parallel; "
                                           "the load then sends only hashes, and a redeploy copies nothing.")

    order = forms.CharField(
        required=False, max_length=2000, label="Pipeline order",
        help_text="Laptop names separated by commas, first to last; laptops not named follow in their own order "
                  "(Laptops → Edit). The 'fastest' mode tries other orders itself.")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["nodes"]  # in pipeline order, numbers counted (hid5-2 before hid5-10)
        field.widget.choices = [(node.pk, field.label_from_instance(node)) for node in sorted(
            Node.objects.all(), key=lambda node: (node.pipeline_order, natural_key(node.name)))]
        self.left_out: list[Node] = []

    def chosen_nodes(self) -> list[Node]:
        """In pipeline order. Every ready laptop when none is chosen, and, when they are more than one model can
        span, the best within the limit; `left_out` the others."""
        nodes = list(self.cleaned_data["nodes"]) or list(Node.objects.filter(status=NodeStatus.READY))
        named = self.cleaned_data.get("order_names", [])
        ordered = sorted(nodes, key=lambda node: (named.index(node.name) if node.name in named else len(named),
                                                  node.pipeline_order, natural_key(node.name)))
        kept, self.left_out = best_within_limit(ordered, named)
        return kept

    def clean(self):
        data = super().clean()
        if len(data.get("nodes") or []) > runtime.MAX_LAPTOPS:
            self.add_error("nodes", f"{limit_words()}, and {len(data['nodes'])} were chosen: choose at most "
                                    f"{runtime.MAX_LAPTOPS}.")
        names = [name.strip() for name in data.get("order", "").split(",") if name.strip()]
        chosen = {node.name for node in (data.get("nodes") or Node.objects.filter(status=NodeStatus.READY))}
        unknown = [name for name in names if name not in chosen]
        if unknown:
            self.add_error("order", f"Not among the laptops planned on: {', '.join(unknown[:5])}.")
        elif len(set(names)) != len(names):
            self.add_error("order", "Name each laptop once.")
        data["order_names"] = names
        return data


@lab_admin_required
def plan_page(request: HttpRequest) -> HttpResponse:
    form = PlanForm(request.GET or None)
    context = {"form": form}
    if form.is_valid():
        data, nodes = form.cleaned_data, form.chosen_nodes()
        results = plans_for(data, nodes)
        chosen = results[data["mode"]]
        charts = [{"title": f"{mode}{' (chosen)' if mode == data['mode'] else ''}", "plan": plan}
                  for mode, plan in results.items() if "error" not in plan]
        context.update(results=results, chosen=chosen, nodes=nodes, charts=charts,
                       left_out=left_out_words(form.left_out), watch=laptops_to_watch(nodes))
        if "error" not in chosen:
            context.update(people=people_at_once(chosen), split=plan_words.split_rows(chosen))
    return render(request, "models_app/plan.html", context)


def plans_for(data: dict, nodes: list[Node]) -> dict[str, dict]:
    """Every mode's plan over the same laptops, read from the database once."""
    try:
        machines = machines_for(nodes)
    except PlanningError as exc:
        return {mode: {"error": str(exc)} for mode in MODES}
    return {mode: plan_or_error(data, nodes, mode, machines) for mode in MODES}


def plan_or_error(data: dict, nodes: list[Node], mode: str, machines: list | None = None) -> dict:
    """The plan's record, with why its slots are what they are when nobody chose them; or {"error": why not}."""
    try:
        plan = make_plan(data["model"], nodes, data["ctx"], mode, head_layers=data["head_layers"],
                         slots=data["slots"], machines=machines)
    except PlanningError as exc:
        return {"error": str(exc)}
    return {**as_record(plan), "slots_reason": "" if data["slots"] else why_these_slots(plan.slots, plan.ctx)}


@lab_admin_required
@require_POST
def create_deployment(request: HttpRequest) -> HttpResponse:
    form = PlanForm(request.POST)
    if not form.is_valid():
        said = " ".join(message for errors in form.errors.values() for message in errors)
        messages.error(request, f"Nothing was started: {said} Plan again.")
        return redirect("models:plan")
    data = form.cleaned_data
    try:
        deployment = deploy.create(data["model"], form.chosen_nodes(), data["ctx"], data["mode"],
                                   user=request.user, head_layers=data["head_layers"], preseed=data["preseed"],
                                   slots=data["slots"])
    except PlanningError as exc:
        messages.error(request, f"Nothing was started: {exc}")
        return redirect("models:plan")
    prepare_soon(deployment)
    return redirect("models:deployment", pk=deployment.pk)


@lab_admin_required
def deployment_page(request: HttpRequest, pk: int) -> HttpResponse:
    deployment = get_object_or_404(Deployment.objects.select_related("model"), pk=pk)
    stages = deployment.stages.select_related("node", "server")
    return render(request, "models_app/deployment.html", {"deployment": deployment, "stages": stages,
                                                           "troubles": troubles(deployment, stages),
                                                           "charts": [{"title": "", "plan": deployment.plan}],
                                                           "accuracy": accuracy(deployment.plan),
                                                           "max_draft_tokens": MAX_DRAFT_TOKENS,
                                                           "draft_choices": draft_choices(deployment)})


def draft_choices(deployment: Deployment) -> list[dict]:
    """Ready text models that may share the deployment's vocabulary (by its size), and the current draft whatever
    it is now (a choice left out would be switched to n-grams by the next save); each with what it would hold on the
    head."""
    vocab = deployment.model.vocab_size
    found = GgufModel.objects.filter(Q(pk=deployment.draft_model_id) | Q(
        status=ModelStatus.READY, pooling=0, vocab_size__lte=vocab,
        vocab_size__gte=vocab - drafts.MAX_VOCAB_DIFFERENCE))
    return [{"name": model.name, "chosen": model.pk == deployment.draft_model_id,
             "mib": drafts.head_memory(model, deployment.ctx, deployment.slots).total // planner.MiB}
            for model in found.order_by("size")]


def troubles(deployment: Deployment, stages) -> list[dict]:
    """What is wrong under a deployment that still says Ready: a laptop off the network or an rpc-server the
    supervisor cannot bring back (the header alone said "Ready" above a failed server)."""
    if deployment.status != DeploymentStatus.READY:
        return []
    found = []
    for stage in stages:
        server, node = stage.server, stage.node
        if server and server.status == ServerStatus.FAILED:
            why = server.last_death.partition("\n")[0].rstrip(".")
            found.append({"node": node.name, "text": f"{node.name}: its rpc-server failed ({why})."})
        elif node.status != NodeStatus.READY:
            found.append({"node": node.name, "text": f"{node.name}: {node.get_status_display().lower()}."})
    return found


def accuracy(plan: dict) -> list[dict]:
    """Predicted against measured memory per machine (measured: rpc-server RSS; the head's growth), and what
    llama.cpp itself says it allocated. RSS sees a laptop's RAM, not a GPU's own memory: a laptop's row sums
    what the plan put on its CPU (a laptop with layers on its GPU alone has no row)."""
    measured, allocated, predicted = plan.get("measured", {}), plan.get("allocated", {}), {}
    for stage in plan["stages"]:
        if stage["machine"] in measured and (stage["count"] or stage["machine"] == "head") \
                and stage.get("device", "CPU") == "CPU":
            predicted[stage["machine"]] = predicted.get(stage["machine"], 0) + sum(stage["memory"].values())
    return [{"machine": machine, "predicted": bytes_, "measured": measured[machine],
             "allocated": sum(allocated.get(machine, {}).values()),
             "error": 100 * (bytes_ - measured[machine]) / measured[machine] if measured[machine] else 0.0,
             "within": within_target(bytes_, measured[machine])} for machine, bytes_ in predicted.items()]


def within_target(predicted: int, measured: int) -> bool:
    """The planner's accuracy target: ±5 % or ±32 MiB, whichever is larger."""
    return abs(predicted - measured) <= max(0.05 * measured, 32 * 2**20)


@lab_admin_required
@require_http_methods(["GET", "POST"])
def stop_deployment(request: HttpRequest, pk: int) -> HttpResponse:
    deployment = get_object_or_404(Deployment, pk=pk)
    question, back = f"Stop {deployment}?", reverse("models:deployment", args=[pk])
    try:
        consequences = removal.stopping(deployment)
    except removal.Refused as exc:
        return confirm.refuse(request, question, str(exc), back)
    if request.method == "GET":
        return confirm.ask(request, question, consequences, "Stop", back)
    deploy.stop(deployment)
    messages.success(request, "Stopping: every rpc-server of this deployment is being shut down.")
    return redirect("models:deployment", pk=pk)


@lab_admin_required
@require_http_methods(["GET", "POST"])
def deploy_again(request: HttpRequest, pk: int, ready_only: bool) -> HttpResponse:
    """Recovery from the deployment's own page: redeploy it as it was, or re-plan it on its laptops that are
    ready now."""
    deployment = get_object_or_404(Deployment.objects.select_related("model"), pk=pk)
    stages = list(deployment.stages.select_related("node").order_by("position"))
    chosen = [s.node for s in stages if not ready_only or s.node.status == NodeStatus.READY]
    verb = "Re-plan" if ready_only else "Redeploy"
    question, back = f"{verb} {deployment}?", reverse("models:deployment", args=[pk])
    if request.method == "GET":
        if not chosen:
            return confirm.refuse(request, question, "None of its laptops is ready; bring one back or plan on "
                                                     "others on the Plan page.", back)
        how = "planned anew" if ready_only else "split as before"
        lines = [f"A new deployment of {deployment.model.name} on {', '.join(n.name for n in chosen)}, with "
                 f"{deployment.ctx} tokens of context and {deployment.slots} slot(s), {how}."]
        left = [s.node.name for s in stages if s.node not in chosen]
        if left:
            lines.append(f"Left out, not ready: {', '.join(left)}.")
        if deployment.is_active:
            lines.append(f"This deployment stops first ({removal.in_flight(deployment)}: they end now).")
        return confirm.ask(request, question, lines, verb, back)
    try:
        fresh = deploy.again(deployment, ready_only, request.user)
    except PlanningError as exc:
        return confirm.refuse(request, question, f"Nothing was started: {exc}", back)
    prepare_soon(fresh)
    messages.success(request, f"Deployment #{fresh.pk} replaces #{pk}; it is being prepared.")
    return redirect("models:deployment", pk=fresh.pk)


@lab_admin_required
@require_http_methods(["GET", "POST"])
def remove_deployment(request: HttpRequest, pk: int) -> HttpResponse:
    deployment = get_object_or_404(Deployment, pk=pk)
    return confirm.ask_then_do(
        request, question=f"Remove {deployment}?", back=reverse("models:deployment", args=[pk]), verb="Remove",
        check=lambda: removal.deployment_removal(deployment), act=lambda: removal.remove_deployment(deployment),
        refusals=(removal.Refused,), done=f"Deployment #{pk} removed.", then=reverse("models:deployments"))


@lab_admin_required
@require_POST
def verify_deployment(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        jobs_above.verify(get_object_or_404(Deployment, pk=pk), request.user)
    except jobs_above.NotVerifiable as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Verifying: the same prompt runs here and on the head alone; the result shows "
                                  "below.")
    return redirect("models:deployment", pk=pk)


@lab_admin_required
@require_POST
def make_default(request: HttpRequest, pk: int) -> HttpResponse:
    """The deployment the chat page offers first."""
    deployment = get_object_or_404(Deployment, pk=pk)
    try:
        deploy.make_default(deployment)
    except PlanningError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{deployment} is now the chat page's default.")
    return redirect("models:deployment", pk=pk)


@lab_admin_required
@require_POST
def drafting(request: HttpRequest, pk: int) -> HttpResponse:
    """Speculative decoding by n-gram drafting, on (the most tokens drafted a step) or off (0)."""
    deployment = get_object_or_404(Deployment, pk=pk)
    given = request.POST.get("draft_tokens", "").strip()
    named = request.POST.get("draft_model", "").strip()
    draft = GgufModel.objects.filter(name=named).first() if named else None
    if named and draft is None:
        messages.error(request, f"Drafting is unchanged: there is no model named {named!r}.")
        return redirect("models:deployment", pk=pk)
    try:
        deploy.set_drafting(deployment, int(given) if given.isdigit() else given, draft)
    except PlanningError as exc:
        messages.error(request, f"Drafting is unchanged: {exc}")
    else:
        by = f"by {draft.name} on the head" if draft else "by n-grams"
        messages.success(request, f"Drafting up to {deployment.draft_tokens} tokens a step {by}: its engine takes it "
                                  "within seconds." if deployment.draft_tokens else "Drafting is off.")
    return redirect("models:deployment", pk=pk)


@lab_admin_required
def deployment_list(request: HttpRequest) -> HttpResponse:
    return render(request, "models_app/deployments.html",
                  {"deployments": Deployment.objects.select_related("model")[:50]})
