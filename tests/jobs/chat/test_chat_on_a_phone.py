"""The chat and tokens pages laid out for reading, in a real Chromium at a phone's size: the chat's settings
come before the conversation, folded (they sat under all of it); "Copy" shows only under an answer that has
text (it showed under "Thinking…"); no placeholder is cut ("strings se"); a checkbox sits beside its words."""

from django.utils import timezone

from jobs.models import Conversation, Job, JobKind, JobStatus
from tests.browser import browser_page, log_in
from tests.conftest import PASSWORD

PHONE = {"width": 390, "height": 844}
CUT = """() => [...document.querySelectorAll("input[placeholder]")].filter((e) => e.offsetParent).filter((e) => {
  const pen = document.createElement("canvas").getContext("2d"), style = getComputedStyle(e);
  pen.font = `${style.fontSize} ${style.fontFamily}`;
  const room = e.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return pen.measureText(e.placeholder).width > room; }).map((e) => e.name || e.id)"""


def a_conversation(bob) -> Conversation:
    conversation = Conversation.objects.create(user=bob, title="Plans")
    now = timezone.now()
    fields = {"kind": JobKind.CHAT, "user": bob, "conversation": conversation, "params": {}}
    Job.objects.create(messages=[{"role": "user", "content": "Hello?"}], status=JobStatus.SUCCEEDED,
                       output="Hello.", started=now, first_token=now, finished=now, **fields)
    Job.objects.create(messages=[{"role": "user", "content": "And then?"}], status=JobStatus.QUEUED, **fields)
    return conversation


def test_it_lays_the_chat_out_for_a_phone(bob, web_server):
    conversation = a_conversation(bob)
    with browser_page() as page:
        page.set_viewport_size(PHONE)
        log_in(page, web_server, "bob", PASSWORD)
        page.goto(f"{web_server}/chat/{conversation.pk}/")
        settings, talk = page.locator("#settings"), page.locator(".talk")
        assert settings.bounding_box()["y"] < talk.bounding_box()["y"], "settings before the conversation"
        assert not settings.evaluate("(e) => e.open") and not page.locator("#system").is_visible()
        answered, waiting = page.locator(".turn").all()
        assert answered.locator(".copy").is_visible() and not waiting.locator(".copy").is_visible()
        settings.locator("summary").click()
        assert page.evaluate(CUT) == []


def test_it_keeps_checkboxes_beside_their_words(bob, web_server):
    with browser_page() as page:
        page.set_viewport_size(PHONE)
        log_in(page, web_server, "bob", PASSWORD)
        page.goto(f"{web_server}/account/tokens/")
        box = page.locator("input[name=read_only]").bounding_box()
        words = page.locator("label.check").bounding_box()
        assert box["width"] < 30 and box["y"] - words["y"] < 10, (box, words)
        assert page.evaluate(CUT) == []
