"""A client that gives up while its job still waits in the queue takes the job out of the queue
(the deployment here has no engine, so the job would wait for ever)."""

import pytest
import requests

from jobs.models import Job, JobStatus
from tests.conftest import wait_until
from tests.jobs.conftest import bearer


@pytest.mark.parametrize("stream", [True, False])
def test_it_cancels_the_job_of_a_client_that_hung_up(ready, web_server, bob, stream):
    headers = {"Authorization": bearer(bob)["HTTP_AUTHORIZATION"]}
    # A stream told to wait gets its headers and a comment at once, and its client then times out reading the
    # body (requests says ConnectionError); one that waits for its engine first times out before the headers.
    gives_up = (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) if stream \
        else requests.exceptions.ReadTimeout
    with pytest.raises(gives_up) as gave_up:
        requests.post(f"{web_server}/v1/chat/completions", headers=headers, timeout=3,
                      json={"messages": [{"role": "user", "content": "Hi"}], "stream": stream})
    assert "timed out" in str(gave_up.value), gave_up.value
    job = wait_until(lambda: Job.objects.filter(user=bob).first(), 10, "the job to be made")
    wait_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.CANCELLED, 30, "the job to be cancelled")
