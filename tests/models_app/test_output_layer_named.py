"""llama.cpp counts a model's output layer as layer n_layer: a laptop holding it says so ("layers 21–29 and
the output layer") instead of a layer 30 that a 30-layer model does not have."""

import pytest

from models_app.models import Deployment, DeploymentStage, GgufModel
from nodes.models import Node
from tests.nodes.test_doctor import KEY


@pytest.mark.parametrize("first, count, said", [
    (0, 10, "layers 0–9"), (4, 1, "layer 4"), (21, 10, "layers 21–29 and the output layer"),
    (29, 2, "layer 29 and the output layer"), (30, 1, "the output layer"), (0, 0, "no layers"),
])
def test_it_names_the_output_layer(db, first, count, said):
    model = GgufModel(name="m", n_layer=30)
    stage = DeploymentStage(deployment=Deployment(model=model), node=Node(host_key=KEY), first_layer=first,
                            layer_count=count)
    assert stage.layers_held() == said
