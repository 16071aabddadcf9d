"""Ternary models (llama.cpp's TQ2_0 and TQ1_0, how BitNet b1.58 models are stored): a llama model written here in
f16 and quantized by llama.cpp's own quantizer (tests/models_app/ternary_files.py) is read with its real tensor
sizes, named in words on its page and in the API, planned over two simulated laptops with each laptop's weights
and KV cache equal to what llama.cpp allocates there and its memory within the planner's target (±5 % or
±32 MiB), and, deployed with real rpc-servers, answers token for token as the head alone does.

The files are made once and kept in the build cache (tests/models_app/ternary_files.quantized_models); the two
laptops are the first two of the run's shared simulated LAN."""

import dataclasses
import re

import pytest
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from jobs.engine import verify
from models_app.deploying import deploy
from models_app.gguf.meta import read_metadata
from models_app.library.adding import register_path
from models_app.models import DeploymentStatus
from models_app.pages.plan_views import accuracy
from models_app.planning.planner import Machine, Options, plan_mode, shape_of
from nodes.models import ActionKind, RpcServer, ServerStatus
from nodes.remote import ssh
from tests.conftest import PASSWORD, wait_until
from tests.jobs.cluster import end_engines, engine_ready
from tests.models_app.ternary_files import quantized_models, tensors
from tests.nodes.laptops import register_all

MiB = 2**20
LAYER_WEIGHT = re.compile(r"^blk\.\d+\.(attn_(q|k|v|output)|ffn_(gate|up|down))\.weight$")
BLOCK_BYTES = {"TQ2_0": 66, "TQ1_0": 54}  # per 256 weights: ggml-common.h's block_tq2_0 and block_tq1_0


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    return quantized_models(tmp_path_factory.mktemp("ternary"), ("TQ2_0", "TQ1_0", "Q4_0"), layers=4, embd=512,
                            ffn=1536)


@pytest.fixture
def laptops(lan, transactional_db):
    shared = lan(3)  # as most files ask for it, so that none makes it again; two of its laptops
    nodes = register_all(dataclasses.replace(shared, laptops=shared.laptops[:2]), then=ActionKind.PROBE)
    yield nodes
    for node in nodes:
        ssh.forget(node.ssh_target())


@pytest.mark.parametrize("kind", ["TQ2_0", "TQ1_0"])
def test_it_reads_every_layer_weight_at_its_ternary_size(files, kind):
    meta = read_metadata(files[kind])
    assert meta.file_type == kind and (meta.architecture, meta.n_layer, meta.n_embd) == ("llama", 4, 512)
    table = tensors(files[kind])
    real = {name: int(tensor.n_bytes) for name, tensor in table.items()}
    weights = [name for name in table if LAYER_WEIGHT.match(name)]
    assert len(weights) == 4 * 7 and {table[name].tensor_type.name for name in weights} == {kind}, "all ternary"
    assert all(real[name] == table[name].n_elements // 256 * BLOCK_BYTES[kind] for name in weights)
    assert meta.layer_bytes == [sum(size for name, size in real.items() if name.startswith(f"blk.{i}."))
                                for i in range(4)]
    assert meta.other_tensors == {name: size for name, size in real.items() if not name.startswith("blk.")}
    assert table["token_embd.weight"].tensor_type.name not in BLOCK_BYTES, "llama.cpp keeps the embedding finer"


@pytest.mark.parametrize("kind", ["TQ2_0", "TQ1_0"])
def test_it_plans_each_laptop_with_the_files_own_bytes(files, kind):
    meta = read_metadata(files[kind])
    real = {name: int(tensor.n_bytes) for name, tensor in tensors(files[kind]).items()}
    laptops = [Machine(f"lab-{n}", 1 << 30, 5.0) for n in (1, 2)]
    plan = plan_mode("even", shape_of(meta), Machine("head", 8 << 30, 5.0), laptops,
                     Options(ctx=512, head_may_hold_layers=False))
    layers = [sum(size for name, size in real.items() if name.startswith(f"blk.{i}.")) for i in range(4)]
    # the output layer is the embedding, tied: llama.cpp copies it to the last device, with the final norm
    units = [*layers, real["token_embd.weight"] + real["output_norm.weight"]]
    assert plan.stages[0].memory.weights == real["token_embd.weight"]
    assert [stage.count for stage in plan.stages[1:]] == [3, 2]
    assert [stage.memory.weights for stage in plan.stages[1:]] == [
        sum(units[i] for i in stage.layers) for stage in plan.stages[1:]]


@pytest.mark.parametrize("kind", ["TQ2_0", "TQ1_0"])
def test_its_page_and_the_api_name_the_type_in_words(files, kind, alice):
    model = register_path(files[kind], checksum_now=True)
    bits = {"TQ2_0": "2.06", "TQ1_0": "1.69"}[kind]
    words = f"{kind} (ternary: each weight is −1, 0 or +1; {bits} bits per weight)"
    client = Client()
    client.login(username="alice", password=PASSWORD)
    assert words in client.get(f"/models/{model.name}/").content.decode()
    api = Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'tests')[1]}")
    answer = api.get(f"/api/models/{model.name}/").json()
    assert (answer["file_type"], answer["quantization"]) == (kind, words)


# Q4_0 beside them: llama.cpp repacks it for the head's CPU (AVX2), the laptops never do, and Verify's head-alone
# reference must run the laptops' arithmetic, or a healthy deployment is called "different".
@pytest.mark.parametrize("kind", ["TQ2_0", "TQ1_0", "Q4_0"])
def test_it_deploys_over_two_laptops_within_the_predicted_memory_and_answers_as_the_head_alone(
        files, kind, laptops, supervisor, bob):
    model = register_path(files[kind], checksum_now=True)
    deployment = deploy.create(model, laptops, 512, mode="even")
    try:
        deploy.prepare(deployment, measure_peak=True)
        deployment.refresh_from_db()
        assert deployment.status == DeploymentStatus.READY, deployment.status_detail
        plan = deployment.plan
        for stage in plan["stages"][1:]:
            allocated = plan["allocated"][stage["machine"]]
            assert abs(stage["memory"]["weights"] - allocated["model"]) < MiB, (stage, allocated)
            assert abs(stage["memory"]["kv_cache"] - allocated["KV"]) < MiB, (stage, allocated)
        rows = accuracy(plan)
        assert {row["machine"] for row in rows} == {"head", *(node.name for node in laptops)}
        misses = [(row["machine"], row["predicted"] / MiB, row["measured"] / MiB) for row in rows if not row["within"]]
        assert not misses, f"(machine, predicted MiB, measured MiB) outside the target: {misses}"
        engine_ready(deployment, within=300)
        report = verify.verify(deployment, user=bob, within=600)
        assert report["result"] == "identical", report
        assert report["distributed"].strip(), "it answered"
    finally:
        deploy.stop(deployment)
        wait_until(lambda: not RpcServer.objects.filter(status=ServerStatus.RUNNING).exists(), 60,
                   "every rpc-server stopped")
        supervisor.terminate()
        supervisor.wait(30)
        end_engines()
