"""A user renames and deletes conversations; no two of a user's conversations share a title, whether named
by their first message, renamed, or already duplicated before the upgrade."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from jobs.chat import edits
from jobs.models import Conversation, Job, JobKind, JobStatus
from tests.jobs.standins import ready_deployment
from tests.migrating import migrated_back
from tests.rows import client_for


def test_first_messages_alike_get_numbered_titles(bob, alice):
    first, second = (Conversation.objects.create(user=bob) for _ in range(2))
    edits.name_after(first, "Summarise   this\npaper")
    edits.name_after(second, "Summarise this paper")
    theirs = Conversation.objects.create(user=alice)
    edits.name_after(theirs, "Summarise this paper")
    assert (first.title, second.title, theirs.title) == (
        "Summarise this paper", "Summarise this paper (2)", "Summarise this paper")
    long = Conversation.objects.create(user=bob)
    edits.name_after(long, "word " * 40)
    assert long.title.endswith("…") and len(long.title) == edits.AUTO_TITLE + 1


def test_rename_refuses_a_taken_or_empty_title_and_keeps_the_old_one(bob):
    kept, other = Conversation.objects.create(user=bob, title="Plans"), Conversation.objects.create(user=bob)
    client = client_for(bob)
    for title, said in [("Plans", "already have a conversation called “Plans”"),
                        ("   ", "Give the conversation a title"),
                        ("x" * 201, "201 characters long"), ("a\x00b", "not text")]:
        page = client.post(f"/chat/{other.pk}/rename/", {"title": title}, follow=True)
        assert said in page.content.decode()
        other.refresh_from_db()
        assert other.title == ""
    page = client.post(f"/chat/{other.pk}/rename/", {"title": "  Travel   notes "}, follow=True)
    other.refresh_from_db()
    assert other.title == "Travel notes" and "Renamed to “Travel notes”" in page.content.decode()
    assert kept.title == Conversation.objects.get(pk=kept.pk).title == "Plans"


def test_only_the_owner_renames_or_deletes(bob, alice):
    theirs = Conversation.objects.create(user=alice, title="Mine")
    client = client_for(bob)
    assert client.post(f"/chat/{theirs.pk}/rename/", {"title": "Taken"}).status_code == 404
    assert client.get(f"/chat/{theirs.pk}/delete/").status_code == 404
    assert client.post(f"/chat/{theirs.pk}/delete/").status_code == 404
    assert Conversation.objects.get(pk=theirs.pk).title == "Mine"


def test_delete_asks_first_then_removes_the_conversation_and_its_messages(bob):
    deployment = ready_deployment()
    conversation = Conversation.objects.create(user=bob, title="Old")
    for status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
        Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=bob, conversation=conversation,
                           messages=[{"role": "user", "content": "hi"}], params={}, status=status)
    client = client_for(bob)
    page = client.get(f"/chat/{conversation.pk}/delete/").content.decode()
    assert "Delete “Old”?" in page and "its 2 messages are deleted for good" in page
    assert Conversation.objects.filter(pk=conversation.pk).exists()  # asking deletes nothing
    response = client.post(f"/chat/{conversation.pk}/delete/")
    assert response.status_code == 302
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not Job.objects.filter(conversation_id=conversation.pk).exists()


def test_delete_is_refused_while_an_answer_is_coming(bob):
    conversation = Conversation.objects.create(user=bob, title="Busy")
    Job.objects.create(kind=JobKind.CHAT, deployment=ready_deployment(), user=bob, conversation=conversation,
                       messages=[{"role": "user", "content": "hi"}], params={}, status=JobStatus.RUNNING)
    client = client_for(bob)
    for response in (client.get(f"/chat/{conversation.pk}/delete/"), client.post(f"/chat/{conversation.pk}/delete/")):
        assert response.status_code == 409
        assert "still coming: stop it" in response.content.decode()
    assert Conversation.objects.filter(pk=conversation.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_numbers_titles_that_were_already_alike(bob):
    assert connection.vendor == "sqlite", "the tests' database (clusterpanel/settings.py)"
    deployment = ready_deployment()
    last_id = Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=bob, messages=[], params={}).pk
    Job.objects.all().delete()  # an empty table, as between tests: rebuilt, it would count from 1 again
    with migrated_back([("jobs", "0005_job_cached_tokens")]) as apps:
        old = apps.get_model("jobs", "Conversation")
        for title in ("Notes", "Notes", "Notes", ""):
            old.objects.create(user_id=bob.pk, title=title)
        MigrationExecutor(connection).migrate([("jobs", "0006_one_title_per_conversation")])
        titles = sorted(Conversation.objects.filter(user=bob).values_list("title", flat=True))
    assert titles == ["", "Notes", "Notes (2)", "Notes (3)"]
    applied = MigrationExecutor(connection).loader.applied_migrations
    assert ("jobs", "0007_history_outlives_deployments") in applied, "the database is left at the newest"
    again = Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=bob, messages=[], params={})
    assert again.pk > last_id, "no job id is handed out twice"
