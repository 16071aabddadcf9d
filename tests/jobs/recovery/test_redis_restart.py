"""Redis restarted under a streaming answer (killed as in a crash, back three seconds later): the streaming client
gets the rest of its answer, whole and in order and live again within seconds, or an error; never silence. A
request waiting in the queue behind it is still answered, and the panel takes new work afterwards."""

import json
import threading
import time

import pytest
import requests

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job
from jobs.queue.stream import kept
from tests.conftest import wait_until
from tests.jobs.cluster import slowed
from tests.services import restart_redis

STORY = "Write a long story about a lighthouse keeper."


@pytest.fixture
def auth(bob) -> dict:
    return {"Authorization": f"Bearer {ApiToken.issue(bob, 'tests')[1]}"}


def body(tokens: int, **more) -> dict:
    return {"messages": [{"role": "user", "content": STORY}], "max_tokens": tokens, "temperature": 0, **more}


def streamed(base: str, auth: dict, into: dict) -> None:
    with requests.post(f"{base}/v1/chat/completions", json=body(160, stream=True), headers=auth, stream=True,
                       timeout=(10, 180)) as response:
        into.update(status=response.status_code, lines=[], at=[])
        for line in response.iter_lines(decode_unicode=True):
            if line and not line.startswith(":"):  # a comment says where a waiting job stands
                into["lines"].append(line)
                into["at"].append(time.time())


def test_a_stream_survives_a_redis_restart(cluster, web_server, auth, bob):
    got, waiting = {}, {}
    with slowed(cluster, cpus=0.05):
        client = threading.Thread(target=streamed, args=(web_server, auth, got))
        client.start()
        first = wait_until(lambda: Job.objects.filter(user=bob).first(), 30, "the job to be queued")
        queued = threading.Thread(target=lambda: waiting.update(response=requests.post(
            f"{web_server}/v1/chat/completions", json=body(8), headers=auth, timeout=(10, 300))))
        queued.start()
        wait_until(lambda: len(kept(first.pk)) > 10, 60, "tokens to flow")
        restart_redis(down_for=3)
        back = time.time()
        client.join(240)
        queued.join(300)
    assert not client.is_alive() and not queued.is_alive(), "a client was left waiting"

    first.refresh_from_db()
    assert got["status"] == 200 and got["lines"][-1] == "data: [DONE]", got
    chunks = [json.loads(line[6:]) for line in got["lines"][:-1]]
    errors = [c["error"] for c in chunks if "error" in c]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    if errors:
        assert "Redis" in errors[0]["message"] and first.output.startswith(text)
    else:
        assert first.status == "succeeded" and text == first.output, "the rest came, whole and in order"
        live = [at for at in got["at"] if back < at < first.finished.timestamp() - 1]
        assert len(live) >= 5 and live[0] - back < 5, "the stream came live again soon after Redis did"

    assert waiting["response"].status_code == 200, waiting["response"].text
    after = requests.post(f"{web_server}/v1/chat/completions", json=body(8), headers=auth, timeout=120)
    assert after.status_code == 200, after.text
