"""What a user does to a conversation besides talking: name it, rename it, delete it.

A user's conversations never share a title (a database constraint says so too): the list on the
chat page, and any script reading it, can tell them apart by name.
"""

from django.db import IntegrityError, transaction

from jobs.models import Conversation, JobStatus
from jobs.params import unicode_text

MAX_TITLE = 200
AUTO_TITLE = 60  # a first message names its conversation by its first words


class ManageError(ValueError):
    pass


def clean_title(text) -> str:
    if not isinstance(text, str):
        raise ManageError("The title must be text.")
    title = " ".join(text.split())
    if not title:
        raise ManageError("Give the conversation a title.")
    if len(title) > MAX_TITLE:
        raise ManageError(f"That title is {len(title)} characters long; the limit is {MAX_TITLE}.")
    if not unicode_text(title):
        raise ManageError("That title holds a character that is not text (a lone UTF-16 surrogate or a NUL).")
    return title


def numbered(title: str, n: int) -> str:
    suffix = f" ({n})" if n > 1 else ""
    return title[:MAX_TITLE - len(suffix)] + suffix


def name_after(conversation: Conversation, first_message: str) -> None:
    """Title an untitled conversation after its first message, numbered if the user has one of that name."""
    words = " ".join(first_message.split())
    wanted = words[:AUTO_TITLE] + ("…" if len(words) > AUTO_TITLE else "")
    others = Conversation.objects.filter(user=conversation.user).exclude(pk=conversation.pk)
    for n in range(1, 10_000):
        candidate = numbered(wanted, n)
        if others.filter(title=candidate).exists():
            continue
        try:
            with transaction.atomic():  # a savepoint: another tab may take the same name in between
                Conversation.objects.filter(pk=conversation.pk, title="").update(title=candidate)
        except IntegrityError:
            continue
        conversation.refresh_from_db(fields=["title"])
        return


def rename(conversation: Conversation, text) -> None:
    title = clean_title(text)
    if title == conversation.title:
        return
    taken = ManageError(f"You already have a conversation called “{title}”; choose another title.")
    if Conversation.objects.filter(user=conversation.user, title=title).exclude(pk=conversation.pk).exists():
        raise taken
    try:
        with transaction.atomic():
            Conversation.objects.filter(pk=conversation.pk).update(title=title)
    except IntegrityError:
        raise taken from None
    conversation.title = title


def deletion(conversation: Conversation) -> list[str]:
    """What deleting it ends, or ManageError saying why it cannot go now."""
    if conversation.jobs.filter(status__in=(JobStatus.QUEUED, JobStatus.RUNNING)).exists():
        raise ManageError("Its last answer is still coming: stop it (or let it finish), then delete the conversation.")
    turns = conversation.jobs.filter(retry_of__isnull=True).count()
    return [f"“{conversation}” and its {turns} message{'s' if turns != 1 else ''} are deleted for good."]


def delete(conversation: Conversation) -> None:
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        if locked is None:
            return
        deletion(locked)  # an answer may have been asked for since the question was shown
        locked.delete()
