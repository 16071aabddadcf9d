"""For API tests without a LAN: a deployment row that looks ready (no laptops, no engine), and token headers."""

import pytest

from clusterpanel.models import ApiToken
from models_app.models import Deployment, DeploymentStatus, GgufModel


@pytest.fixture
def ready(db) -> Deployment:
    model = GgufModel.objects.create(name="tiny", path="/nonexistent/tiny.gguf", size=1, architecture="llama",
                                     n_layer=2, n_embd=8, n_head=1, n_head_kv=1, context_length=2048,
                                     vocab_size=32, file_type="Q4_1")
    plan = {"mode": "even", "n_gpu_layers": 0, "tensor_split": [], "tokens_per_second": 1.0, "bottleneck": "head",
            "stages": [{"machine": "head", "first": 0, "count": 2, "memory": {}, "usable": None}]}
    return Deployment.objects.create(model=model, ctx=1024, plan=plan, status=DeploymentStatus.READY,
                                     is_default=True)


def bearer(user) -> dict:
    """Test-client headers carrying a new token of `user`."""
    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(user, 'tests')[1]}"}
