"""A lab admin renames and deletes models and removes deployments: each asks first, says what it frees or
ends, is refused while in use, and leaves users' jobs, batches and conversations in place."""

from pathlib import Path

import pytest
from django.conf import settings

from jobs.models import Batch, Conversation, Job, JobKind, JobStatus
from models_app.models import Deployment, DeploymentStatus, GgufModel, ModelStatus
from tests.rows import client_for

SIZE = 3 * 2**20



def a_model(name: str, path: str, bundled: bool = False) -> GgufModel:
    return GgufModel.objects.create(name=name, path=path, size=SIZE, status=ModelStatus.READY, bundled=bundled,
                                    architecture="llama", n_layer=2, n_embd=8, n_head=1, n_head_kv=1,
                                    context_length=4096, vocab_size=32, file_type="Q4_1", layer_bytes=[1, 1])


@pytest.fixture
def uploaded(db, empty_folders) -> GgufModel:
    file = Path(settings.MODELS_DIR) / "uploaded.gguf"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(b"\0" * SIZE)
    return a_model("uploaded", str(file))


def job_on(deployment, user, **fields) -> Job:
    return Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=user, params={},
                              messages=[{"role": "user", "content": "hi"}], **fields)


def test_an_uploaded_model_is_deleted_with_its_file_and_past_deployments_but_not_users_work(
        uploaded, alice, bob, django_capture_on_commit_callbacks):
    old = Deployment.objects.create(model=uploaded, ctx=512, plan={}, status=DeploymentStatus.STOPPED)
    conversation = Conversation.objects.create(user=bob, deployment=old, title="Kept")
    job = job_on(old, bob, conversation=conversation, status=JobStatus.SUCCEEDED, output="an answer")
    batch = Batch.objects.create(user=bob, deployment=old, name="b.csv", input_format="csv")
    client = client_for(alice)
    page = client.get("/models/uploaded/delete/").content.decode()
    assert "Delete uploaded?" in page and "3 MiB freed on the panel" in page
    assert "1 stopped or failed deployment is removed" in page
    assert Path(uploaded.path).exists()  # asking deletes nothing
    with django_capture_on_commit_callbacks(execute=True):  # the file goes once the rows are gone
        assert client.post("/models/uploaded/delete/").status_code == 302
    assert not Path(uploaded.path).exists()
    assert not GgufModel.objects.filter(pk=uploaded.pk).exists() and not Deployment.objects.filter(pk=old.pk)
    job.refresh_from_db()
    batch.refresh_from_db()
    assert job.output == "an answer" and job.deployment is None and batch.deployment is None
    assert Conversation.objects.get(pk=conversation.pk).jobs.count() == 1
    assert client_for(bob).get(f"/jobs/batches/{batch.pk}/").content.decode().count("a removed deployment") == 1


def test_a_deployed_model_is_not_deleted_and_its_file_stays(uploaded, alice):
    live = Deployment.objects.create(model=uploaded, ctx=512, plan={}, status=DeploymentStatus.READY)
    response = client_for(alice).post("/models/uploaded/delete/")
    assert response.status_code == 409
    assert f"It is deployed (deployment #{live.pk}): stop it there first." in response.content.decode()
    assert Path(uploaded.path).exists() and GgufModel.objects.filter(pk=uploaded.pk).exists()


def test_a_file_registered_by_path_stays_on_disk(alice, tmp_path):
    file = tmp_path / "mine.gguf"
    file.write_bytes(b"\0" * 10)
    model = a_model("mine", str(file))
    client = client_for(alice)
    assert "nothing is freed on the panel" in client.get("/models/mine/delete/").content.decode()
    client.post("/models/mine/delete/")
    assert file.exists() and not GgufModel.objects.filter(pk=model.pk).exists()


def test_the_bundled_model_is_not_deleted(alice):
    a_model("bundled", "/nonexistent/bundled.gguf", bundled=True)
    response = client_for(alice).post("/models/bundled/delete/")
    assert response.status_code == 409 and "ships with the panel" in response.content.decode()
    assert GgufModel.objects.filter(name="bundled").exists()


def test_rename_refuses_a_taken_or_unusable_name(uploaded, alice):
    a_model("other", "/nonexistent/other.gguf")
    client = client_for(alice)
    for wanted, said in [("other", "A model named &#x27;other&#x27; already exists"),
                         ("!!!", "Give the model a name"), ("plan", "")]:
        page = client.post("/models/uploaded/rename/", {"name": wanted}, follow=True).content.decode()
        assert said in page
        assert GgufModel.objects.get(pk=uploaded.pk).name == "uploaded"
    page = client.post("/models/uploaded/rename/", {"name": "Llama 3 8B"}, follow=True)
    assert page.redirect_chain[-1][0] == "/models/llama-3-8b/"
    assert GgufModel.objects.get(pk=uploaded.pk).name == "llama-3-8b"


def test_stop_asks_first_and_says_what_it_ends(uploaded, alice, bob):
    live = Deployment.objects.create(model=uploaded, ctx=512, plan={}, status=DeploymentStatus.READY)
    job_on(live, bob, status=JobStatus.RUNNING)
    for _ in range(5):
        job_on(live, bob, status=JobStatus.QUEUED)
    client = client_for(alice)
    page = client.get(f"/models/deployments/{live.pk}/stop/").content.decode()
    assert "1 job running, 5 waiting" in page
    assert Deployment.objects.get(pk=live.pk).status == DeploymentStatus.READY
    client.post(f"/models/deployments/{live.pk}/stop/")
    assert Deployment.objects.get(pk=live.pk).status == DeploymentStatus.STOPPED


def test_a_deployment_is_removed_only_once_stopped(uploaded, alice, bob):
    live = Deployment.objects.create(model=uploaded, ctx=512, plan={}, status=DeploymentStatus.LOADING)
    client = client_for(alice)
    response = client.post(f"/models/deployments/{live.pk}/remove/")
    assert response.status_code == 409 and "It is loading: stop it first." in response.content.decode()
    Deployment.objects.filter(pk=live.pk).update(status=DeploymentStatus.FAILED)
    job = job_on(live, bob, status=JobStatus.FAILED)
    page = client.get(f"/models/deployments/{live.pk}/remove/").content.decode()
    assert "Its 1 finished job and 0 batches stay" in page
    assert client.post(f"/models/deployments/{live.pk}/remove/").status_code == 302
    assert not Deployment.objects.filter(pk=live.pk).exists()
    assert Job.objects.get(pk=job.pk).deployment is None


def test_plain_users_cannot_remove_anything(uploaded, bob):
    stopped = Deployment.objects.create(model=uploaded, ctx=512, plan={}, status=DeploymentStatus.STOPPED)
    client = client_for(bob)
    for url in ("/models/uploaded/delete/", f"/models/deployments/{stopped.pk}/remove/"):
        assert client.post(url).status_code in (302, 403)
    assert GgufModel.objects.filter(pk=uploaded.pk).exists() and Deployment.objects.filter(pk=stopped.pk).exists()
