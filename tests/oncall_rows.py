"""On-call tests without laptops: laptops as rows with their usable memory set, models as rows with their layers'
sizes, deployments planned onto them by the scheduler itself (nothing is prepared: no worker runs here)."""

from itertools import count

from models_app.models import Deployment, DeploymentStatus, GgufModel, ModelStatus
from models_app.oncall.service import Settings, save
from nodes.models import Node, NodeStatus
from tests.rows import HOST_KEY

MiB, GiB = 2**20, 2**30
_numbers = count(1)


def laptops(how_many: int, gib: float = 2.0, prefix: str = "oc") -> list[Node]:
    """Ready laptops of `gib` usable memory each, all as fast."""
    made = []
    for _ in range(how_many):
        n = next(_numbers)
        made.append(Node.objects.create(name=f"{prefix}-{n}", host=f"192.0.{n // 250}.{n % 250 + 1}", username="u",
                                        host_key=HOST_KEY, status=NodeStatus.READY, usable_memory=int(gib * GiB),
                                        speed_gb_s=10.0))
    return made


def gguf(name: str, layers: int = 8, layer_mib: int = 100, context: int = 4096) -> GgufModel:
    """A llama-shaped model of `layers` × `layer_mib` MiB (about 0.9 GiB by default: one 2 GiB laptop holds it)."""
    return GgufModel.objects.create(
        name=name, path=f"/nonexistent/{name}.gguf", size=1, status=ModelStatus.READY, architecture="llama",
        n_layer=layers, n_embd=1024, n_head=8, n_head_kv=8, context_length=context, vocab_size=32000,
        file_type="Q4_K_M", layer_bytes=[layer_mib * MiB] * layers,
        other_tensors={"token_embd.weight": 30 * MiB, "output.weight": 30 * MiB})


def on_call(model: GgufModel, pool: list[Node] | None = None, **settings):
    return save(model, Settings(pool, **{"ctx": 1024, **settings}))


def serving(deployment: Deployment) -> Deployment:
    """A deployment the scheduler made, as if prepared and its engine loaded."""
    Deployment.objects.filter(pk=deployment.pk).update(status=DeploymentStatus.READY, engine={"state": "ready"})
    deployment.refresh_from_db()
    return deployment
