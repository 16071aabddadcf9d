"""A deployment whose laptop the collector sees offline (frozen, asleep, off the network) leaves /v1/models and
the chat page's choices at once and answers a 503 in OpenAI's shape naming the laptop (the chat page says so
too), until the laptop is back; a request whose job a laptop's death failed for good is a 503 too, not a 500:
the request was not at fault. Before, such a deployment stayed listed and ready 35 s into a freeze, and the
request answered 500."""

import time

from django.test import Client

from jobs.api import openai_api
from jobs.models import NOT_RETRIED, STOPPED, Conversation
from jobs.queue import queueing
from models_app.models import DeploymentStage
from nodes.models import Node, NodeStatus
from tests.conftest import wait_until
from tests.jobs.conftest import bearer
from tests.nodes.trouble import asleep

ASK = {"messages": [{"role": "user", "content": "Hello?"}], "max_tokens": 8}


def listed(api: Client) -> set[int]:
    return {model["deployment"] for model in api.get("/v1/models").json()["data"]}


def refused(api: Client, model: str | None, laptop: str) -> None:
    answer = api.post("/v1/chat/completions", {**ASK, "model": model}, "application/json")
    assert answer.status_code == 503, answer.content
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == ("server_error", "model_not_available")
    assert laptop in error["message"] and "offline" in error["message"]


def test_a_deployment_with_a_laptop_offline_is_not_offered_and_answers_503(ready, bob):
    laptop = Node.objects.create(name="desk-1", host="10.232.0.50", username="u", status=NodeStatus.READY)
    DeploymentStage.objects.create(deployment=ready, position=0, node=laptop, first_layer=0, layer_count=2,
                                   memory={})
    api = Client(**bearer(bob))
    assert listed(api) == {ready.pk}

    laptop.set_status(NodeStatus.OFFLINE, "No metrics for 4 s.")
    assert listed(api) == set() and not queueing.usable_deployments().exists()
    for model in (None, ready.model.name, f"deployment-{ready.pk}"):
        refused(api, model, "desk-1")
    browser = Client()
    browser.force_login(bob)
    conversation = Conversation.objects.create(user=bob)
    sent = browser.post(f"/chat/{conversation.pk}/send/", {"text": "Hello?", "deployment": ready.pk},
                        content_type="application/json")
    assert sent.status_code == 400 and "desk-1 is offline" in sent.json()["error"], "the chat page says why"

    laptop.set_status(NodeStatus.READY)
    assert listed(api) == {ready.pk}, "offered again once the laptop is back"


def test_a_frozen_laptop_takes_its_deployment_off_the_list_within_seconds_until_it_thaws(cluster, collector, lan,
                                                                                        bob):
    api = Client(**bearer(bob))
    wait_until(lambda: listed(api) == {cluster.pk} and not Node.objects.exclude(status=NodeStatus.READY).exists(),
               30, "every laptop sampled")
    laptop = lan(3).laptops[0]
    with asleep(laptop):  # every process of the laptop stopped: its rpc-server and SSH answer nothing
        frozen = time.monotonic()
        wait_until(lambda: not listed(api), 30, "the deployment to leave /v1/models")
        assert time.monotonic() - frozen < 15, "within seconds, not half a minute"
        refused(api, cluster.model.name, laptop.name)
    wait_until(lambda: listed(api) == {cluster.pk}, 60, "the deployment offered again once its laptop thaws")


def test_a_job_a_laptops_death_failed_for_good_answers_503():
    done = {"status": "failed", "error": f"{STOPPED} desk-1 stopped answering during generation. {NOT_RETRIED} "
                                         "It no longer fits without desk-1: no laptop is left."}
    status, body = openai_api.failure(done, openai_api.parse(ASK, "chat"))
    assert status == 503 and body["error"]["type"] == "server_error", body
    assert body["error"]["code"] == "service_unavailable" and "no laptop is left" in body["error"]["message"]
