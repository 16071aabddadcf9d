import hashlib
import time

from celery import shared_task
from django.db import transaction

from clusterpanel.kit.broadcast import broadcast
from models_app.deploying import tensor_cache
from models_app.models import GgufModel, ModelStatus


@shared_task(acks_late=True)
def checksum(model_id: int) -> str:
    """sha256 of the model file, with progress, so deployments can tell files apart; then the FNV-1a
    hashes of its big tensors, the names the rpc-servers' caches give them (models_app/deploying/tensor_cache.py)."""
    model = GgufModel.objects.get(pk=model_id)
    digest, done, last = hashlib.sha256(), 0, 0.0
    try:
        with open(model.path, "rb") as handle:
            while block := handle.read(8 << 20):
                digest.update(block)
                done += len(block)
                if time.monotonic() - last > 0.5:
                    last = time.monotonic()
                    report(model, progress=done / model.size)
        hashes = tensor_cache.hash_tensors(model.path)
    except OSError as exc:
        report(model, status=ModelStatus.FAILED, status_detail=f"Cannot read {model.path}: {exc.strerror}")
        return model.status
    report(model, sha256=digest.hexdigest(), tensor_hashes=hashes, progress=1.0, status=ModelStatus.READY)
    return model.status


def report(model: GgufModel, progress: float | None = None, **fields) -> None:
    if progress is not None:
        fields["hash_progress"] = round(progress, 4)
    GgufModel.objects.filter(pk=model.pk).update(**fields)
    for name, value in fields.items():
        setattr(model, name, value)
    shown = {k: str(v) for k, v in fields.items() if k != "tensor_hashes"}
    broadcast(f"model_{model.pk}", "model.progress", {"id": model.pk, **shown})


@shared_task(acks_late=True)
def prepare_deployment(deployment_id: int, measure_peak: bool = False) -> str:
    from models_app.deploying import deploy
    from models_app.models import Deployment

    deployment = Deployment.objects.get(pk=deployment_id)
    deploy.prepare(deployment, measure_peak)
    return deployment.status


def prepare_soon(deployment) -> None:
    """A worker prepares it once what created it has committed (the page's Deploy, the API, a redeploy)."""
    transaction.on_commit(lambda: prepare_deployment.delay(deployment.pk))
