"""Conversations on the chat page: turns, the messages sent to the model, and answers as safe HTML.

A turn is one chat job: its last message is what the user typed, its output the
answer. A job retried after a laptop failed is shown by its retry.
"""

from dataclasses import dataclass

from django.db import transaction
from markdown_it import MarkdownIt

from jobs.chat import edits
from jobs.models import Conversation, Job, JobKind, JobStatus
from jobs.params import Params, unicode_text
from jobs.queue import admission, queueing, routing, wakeup
from models_app.models import Deployment, DeploymentStatus, OnCall

MAX_MESSAGE_CHARS = 32_000
# Raw HTML off: model output is text, and Markdown is only ever rendered into escaped, link-checked HTML.
# Images off: the browser would fetch whatever URL the model wrote (`![x](http://…)` stays a plain link).
MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table").disable("image")


def aligned_by_class(state) -> None:
    """markdown-it aligns a table's cells with a style attribute, which the Content-Security-Policy refuses
    (no inline style): a class instead (static/css/panel.css)."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open") and "style" in token.attrs:
            align = str(token.attrs.pop("style")).removeprefix("text-align:")
            token.attrSet("class", f"align-{align}")


MARKDOWN.core.ruler.push("aligned_by_class", aligned_by_class)


class ChatError(ValueError):
    pass


@dataclass
class Turn:
    job: Job
    question: str

    @property
    def answer_html(self) -> str:
        return render(self.job.output)


def render(text: str) -> str:
    return MARKDOWN.render(text)


def default_deployment() -> Deployment | None:
    return queueing.usable_deployments().first()


def turns(conversation: Conversation) -> list[Turn]:
    jobs = conversation.jobs.filter(retry__isnull=True).select_related("deployment").order_by("created", "pk")
    return [Turn(job, job.messages[-1]["content"] if job.messages else "") for job in jobs]


def history(conversation: Conversation) -> list[dict]:
    """The messages so far, as the model sees them: the system prompt, then each finished turn."""
    messages = [{"role": "system", "content": conversation.system_prompt}] if conversation.system_prompt else []
    for turn in turns(conversation):
        if turn.job.status in (JobStatus.SUCCEEDED, JobStatus.CANCELLED) and turn.job.output:
            messages += [{"role": "user", "content": turn.question},
                         {"role": "assistant", "content": turn.job.output}]
    return messages


MODEL = "model:"  # the page's choice of a model (any of its replicas) rather than of one deployment


def chosen(value, conversation: Conversation, tokens: int) -> tuple[Deployment, str | None]:
    """Where the page's choice sends the next turn, and the model it was routed by (None: the user chose one
    deployment). A model goes to its replica that answers soonest, the conversation kept on the replica that
    ran its last turn unless that one is much slower (jobs/queue/routing.py)."""
    if not (isinstance(value, str) and value.startswith(MODEL)):
        return ready_deployment(value), None
    name = typed_text(value, "model").removeprefix(MODEL)  # a NUL would reach the database's query
    home = routing.conversation_home(conversation.pk)
    found = routing.pick(name, tokens, home=home) or next(iter(routing.replicas(name, offline_too=True)), None)
    if found is None and OnCall.objects.filter(model__name=name).exists():
        return None, name  # on call and asleep (or loading): `ask` wakes it once the turn is admitted
    if found is None:  # one whose laptop is offline is found above: sending to it says why it cannot answer now
        raise ChatError(f"No deployment of {name[:80]} is ready; choose another model.")
    return found, name


def woken(name: str, tokens: int) -> Deployment:
    """The deployment an on-call model's turn waits on: the one loading it, or one made now; a replica that
    serves if one has come up meanwhile."""
    try:
        deployment = wakeup.wake(name, tokens) or routing.pick(name, tokens)
    except (wakeup.NoRoom, wakeup.TooLong) as exc:
        raise ChatError(str(exc)) from None
    if deployment is None:
        raise ChatError(f"No deployment of {name[:80]} is ready; choose another model.")
    return deployment


def ready_deployment(value) -> Deployment:
    """The ready deployment the page chose: its id, as a number or the select's string."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        value = int(value)
    found = None
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63:
        # One whose laptop is offline too: sending to it then says why it cannot answer now (queueing).
        found = queueing.usable_deployments(offline_too=True).filter(pk=value).first()
    if found is None:
        raise ChatError("Choose a ready deployment (an admin deploys models on the Plan page).")
    return found


def typed_text(value, what: str) -> str:
    """Text the page sent, refused in words if it is not a string or not Unicode (a lone surrogate, which JSON
    can carry, cannot be stored or read by the model)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ChatError(f"The {what} must be text.")
    if not unicode_text(value):
        raise ChatError(f"The {what} holds a character that is not text (a lone UTF-16 surrogate or a NUL); "
                        "remove it and send again.")
    return value


def set_system_prompt(conversation: Conversation, value) -> None:
    system = typed_text(value, "system prompt")
    if len(system) > MAX_MESSAGE_CHARS:
        raise ChatError(f"The system prompt is {len(system)} characters long; the limit is {MAX_MESSAGE_CHARS}.")
    if system != conversation.system_prompt:
        conversation.system_prompt = system
        conversation.save(update_fields=["system_prompt"])


def ask(conversation: Conversation, text: str, params: Params, deployment: Deployment | None,
        routed_by: str | None = None) -> Job:
    """The turn queued on `deployment`; None: the on-call model `routed_by`, woken once the turn is admitted."""
    text = text.strip()
    if not text:
        raise ChatError("Type a message first.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ChatError(f"That message is {len(text)} characters long; the limit is {MAX_MESSAGE_CHARS}.")
    if not unicode_text(text):
        raise ChatError("That message holds a character that is not text (a lone UTF-16 surrogate or a NUL); "
                        "remove it and send again.")
    if deployment is not None and deployment.status not in (DeploymentStatus.READY, DeploymentStatus.DEGRADED):
        raise ChatError(f"{deployment} is {deployment.get_status_display().lower()}; choose a ready one.")
    if conversation.jobs.filter(status__in=(JobStatus.QUEUED, JobStatus.RUNNING)).exists():
        raise ChatError("The last answer is still coming; wait for it or stop it first.")
    admission.admit(conversation.user, None)  # OverLimit says when the user may ask again
    try:
        if not conversation.title:
            edits.name_after(conversation, text)
        with transaction.atomic():  # the engine is woken when this commits: QueueDown comes from here
            deployment = deployment or woken(routed_by, params.max_tokens)
            conversation.deployment, conversation.params = deployment, params.as_dict()
            conversation.save(update_fields=["deployment", "params", "updated"])
            job = Job(kind=JobKind.CHAT, deployment=deployment, user=conversation.user, conversation=conversation,
                      messages=[*history(conversation), {"role": "user", "content": text}],
                      params=routing.routed(params.as_dict(), routed_by) if routed_by else params.as_dict())
            queueing.submit(job)
    except queueing.QueueError as exc:
        raise ChatError(str(exc)) from None
    except queueing.QueueDown as exc:
        raise ChatError(f"Could not send it: Redis, which carries jobs, is unreachable ({exc}). "
                        "Try again in a moment.") from None
    return job
