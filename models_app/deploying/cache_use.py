"""The deployments' answers to what nodes/laptops/holds.py asks about a laptop's rpc cache: which of its files the
deployments on it need (nodes/servers/cleaning.py never removes those), and which model each file holds a tensor of.
Registered when the app starts (models_app/apps.py)."""

from models_app.models import Deployment, DeploymentStage, DeploymentStatus, GgufModel
from nodes.laptops.holds import NotKnown
from nodes.servers import cache as rpccache

# A planned deployment is about to be prepared: its files are as good as needed.
HOLDING = (DeploymentStatus.PLANNED, *Deployment.ACTIVE)


def needs(node) -> set[str]:
    stages = DeploymentStage.objects.filter(node=node, deployment__status__in=HOLDING)
    return {tensor.hash for stage in stages.select_related("deployment__model") for tensor in files_of(stage)}


def files_of(stage: DeploymentStage) -> list[rpccache.Tensor]:
    """The cache files the stage's laptop serves its deployment from: worked out from the plan and the model's
    hashes, which are taken now if the file changed; when it cannot be read, the hashes it was seeded with."""
    from models_app.deploying import preseed  # here: web processes ask only owners(), and need not load gguf and numpy

    deployment = stage.deployment
    try:
        try:
            per_laptop = preseed.needed(deployment)
        except preseed.PreseedError as exc:
            if not deployment.model.tensor_hashes:
                raise NotKnown(f"which files {deployment} needs cannot be told: {exc}") from None
            per_laptop = preseed.needed(deployment, deployment.model.tensor_hashes)
    except (KeyError, TypeError) as exc:  # a plan recorded without its split
        raise NotKnown(f"which files {deployment} needs cannot be told: its plan lacks {exc}") from None
    return per_laptop[stage.position] if stage.position < len(per_laptop) else []


def owners() -> dict[str, str]:
    """{file name: model name} for every tensor the library's models would put in a cache (their hashes, taken
    for their first pre-seeded deployment or on registration)."""
    found: dict[str, str] = {}
    for name, hashes in GgufModel.objects.exclude(tensor_hashes=None).values_list("name", "tensor_hashes"):
        for tensor in (hashes or {}).get("tensors", {}).values():
            if "hash" in tensor:
                found.setdefault(tensor["hash"], name)
    return found
