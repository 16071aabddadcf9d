"""/api/nodes/actions/: one action on many laptops at once (probe, install the runtime, restart rpc-servers,
remove), each laptop its own action with its own progress, and the whole selection followed in one stream."""

from typing import Literal

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from django.urls import reverse
from ninja import Field, Query, Router, Schema, Status

from clusterpanel.accounts.apiauth import admin_only
from clusterpanel.kit.apikit import ApiError, Input, described_as_events, errors, event_stream, follow
from clusterpanel.kit.natural import natural_key
from nodes.actions import bulk
from nodes.api.laptops import ActionOut
from nodes.api.rows import action_row
from nodes.models import NodeAction

router = Router()
MOST_FOLLOWED = 1000  # action ids in one selection: far more laptops than a lab has


class SelectionIn(Input):
    action: Literal["probe", "install_runtime", "restart_rpc", "remove"]
    nodes: list[str] = Field(description="The laptops' names, each once.", max_length=MOST_FOLLOWED)
    wipe: bool = Field(False, description="remove only: also delete the runtime and caches the panel put there.")


class SelectionOut(Schema):
    action: str | None = Field(description="The kind of every action in it (null when they differ).")
    ended: bool
    summary: str = Field(description='"3 of 12 ended." while they run; then what they came to, e.g. '
                                     '"10 probed; 2 unreachable: hid5-3, hid5-7."')
    counts: dict[str, int] = Field(description="How many are queued, running, succeeded and failed.")
    actions: list[ActionOut] = Field(description="One per laptop, in natural order of their names.")
    url: str
    events: str = Field(description="Server-Sent Events of the whole selection until every action has ended.")


def selection(actions: list[NodeAction]) -> dict:
    actions = sorted(actions, key=lambda action: natural_key(action.laptop_name))
    ids = ",".join(str(action.pk) for action in actions)
    kinds = {action.kind for action in actions}
    return {"action": kinds.pop() if len(kinds) == 1 else None, "summary": bulk.summary(actions),
            "ended": all(action.status in NodeAction.TERMINAL for action in actions),
            "counts": {status: sum(action.status == status for action in actions)
                       for status in ("queued", "running", "succeeded", "failed")},
            "actions": [action_row(action) for action in actions],
            "url": f"{reverse('api:get_selection')}?ids={ids}",
            "events": f"{reverse('api:follow_selection')}?ids={ids}"}


def actions_of(ids: str) -> list[NodeAction]:
    """The actions `ids` ("4,5,6") names, every one of them, or ApiError saying what is wrong."""
    parts = ids.split(",")
    if not ids:
        raise ApiError("ids: name the actions to follow, e.g. ?ids=4,5,6 (the selection's url gives them).", 400, "ids")
    if len(parts) > MOST_FOLLOWED or not all(part.isascii() and part.isdigit() and len(part) <= 18 for part in parts):
        raise ApiError(f"ids must be action ids separated by commas (at most {MOST_FOLLOWED}), e.g. 4,5,6.", 400,
                       "ids")
    wanted = {int(part) for part in parts}
    found = list(NodeAction.objects.select_related("node").filter(pk__in=wanted))
    missing = wanted - {action.pk for action in found}
    if missing:
        raise ApiError(f"There is no action {', '.join(map(str, sorted(missing)))}.", 404, "ids")
    return found


@router.post("/", response={202: SelectionOut, **errors(403)}, summary="Start an action on many laptops at once")
def start_selection(request: HttpRequest, payload: SelectionIn):
    user = admin_only(request, "act on laptops")
    try:
        actions = bulk.start(payload.action, payload.nodes, user, payload.wipe)
    except bulk.Refused as exc:
        raise ApiError(f"{exc} Nothing was started.", 400, exc.field) from None
    return Status(202, selection(actions))


# Not required by the schema: a plain user is told the API is for lab admins before anything else.
IDS = Query("", description="Action ids separated by commas, as the selection's url gives them.")


@router.get("/", response={200: SelectionOut, **errors(403, 404)}, url_name="get_selection",
            summary="The state of many laptops' actions")
def get_selection(request: HttpRequest, ids: str = IDS):
    admin_only(request, "follow laptops' actions")
    return selection(actions_of(ids))


@router.get("/events/", response=errors(403, 404), url_name="follow_selection",
            openapi_extra=described_as_events(SelectionOut), summary="Follow many laptops' actions live, until all end")
async def follow_selection(request: HttpRequest, ids: str = IDS):
    await sync_to_async(admin_only)(request, "follow laptops' actions")
    chosen = [action.pk for action in await sync_to_async(actions_of)(ids)]

    def snapshot() -> dict | None:
        found = list(NodeAction.objects.select_related("node").filter(pk__in=chosen))
        return selection(found) if found else None

    return event_stream(follow(snapshot, lambda state: state["ended"]))
