"""Which replica answers a request that names a model: the one that will answer it soonest.

A model may have several usable deployments (replicas) on disjoint laptops. For each, `estimate` guesses in
seconds when a request of `tokens` tokens would have its whole answer, from four figures:

- `slots`: how many answers its engine makes at once (the engine's report, else the deployment's setting);
- `ahead`: its jobs RUNNING plus QUEUED, counted in the database (the engine's own `busy` lags by up to its
  report interval, and a burst of requests must see each other at once to spread);
- `rate`: the tokens/s its engine makes over all its answers together: the engine's measured total
  (`tokens_per_s`) while that figure is fresh (models_app/activity.STALE_S), else the rate its last answers
  were made at together (jobs of the last few minutes: their tokens over the time any was being made), else,
  never measured, its siblings' median (or DEFAULT_SPEED_TOKENS_S);
- `not_serving_s`: a fixed cost for an engine that is not taking jobs now: loading or restarting
  (LOADING_S) or a deployment being recovered (RECOVERING_S).

    wait_s   = 0                                      if ahead < slots (a slot is free)
             = (ahead - slots + 1) * tokens / rate    otherwise
    answer_s = not_serving_s + (ahead + 1) * tokens / rate

An engine shares its rate among the answers it makes, so the new answer and every one ahead of it (each taken to
be as long as this one: the panel cannot know the others' lengths) are made at `rate` together: the request has
its whole answer after (ahead + 1) * tokens of the engine's work. A full engine frees a slot every
tokens / rate seconds (`wait_s`, what the request waits before it starts). A free slot does not make an answer
free: a replica already making seven answers gives an eighth a seventh of the speed an idle one gives it (an
estimate from one answer's speed once sent a burst of 16 requests 12 to 4 to two equal replicas). Since every
term scales with `tokens`, the order of the replicas does not depend on it; only the seconds (the conversation
margin below) do. Equal estimates go to the emptier replica (ahead per slot), then the older deployment.

A replica whose engine does not answer yet (loading, restarting, being recovered) is chosen only when none
answers: it takes its share of what waits on the others as soon as its engine is up (jobs/queue/sharing.py),
where an estimate of its loading time once sent it none of a burst or most of one.

A conversation stays on the replica that holds its prefix (its last job's deployment: that engine's sequence
cache still has the earlier turns, jobs/engine/sequences.py) unless that one's estimate is more than twice the
best's and more than KEEP_PREFIX_EXTRA_S longer. Elsewhere the whole conversation is read again: on laptops that
is seconds for a long one, so a move must save clearly more than that; "twice" keeps noisy estimates of long
queues from bouncing a conversation between replicas.

A job routed here carries its model in `params["routing"]` (`routed_model`): failover (jobs/queue/failover.py) may
move it to another replica of that model while it waits; a job sent to one deployment (`deployment-<id>`, the
API's `deployment`, a deployment chosen on the chat page) stays there.
"""

import statistics
import time
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from jobs.models import Job, JobStatus
from jobs.queue import queueing
from models_app.deploying.activity import STALE_S, number, whole
from models_app.models import Deployment, DeploymentStatus

DEFAULT_TOKENS = 256  # a request's tokens when it does not say (jobs/params.py's max_tokens default)
DEFAULT_SPEED_TOKENS_S = 10.0  # no replica of the model has answered yet: only `ahead` and `slots` then decide
LOADING_S = 30.0  # an engine loading or restarting: a small model takes seconds, a big one on laptops a minute
RECOVERING_S = 60.0  # a degraded or recovering deployment: re-planned and reloaded before it answers again
HISTORY_S = 600  # answers older than this say little about a replica's speed now
HISTORY_JOBS = 10
KEEP_PREFIX_RATIO, KEEP_PREFIX_EXTRA_S = 2.0, 10.0
ROUTING = "routing"  # the job params' key: {"model": name, "moves": [{"from", "to", "why", "at"}]}


@dataclass(frozen=True)
class Estimate:
    deployment: Deployment
    slots: int
    ahead: int
    rate: float  # tokens/s its engine makes, all its answers together
    not_serving_s: float
    wait_s: float
    answer_s: float

    @property
    def order(self) -> tuple:
        return round(self.answer_s, 3), self.ahead / self.slots, self.deployment.pk


def replicas(model_name: str, offline_too: bool = False) -> list[Deployment]:
    """The model's deployments that take jobs (queueing.usable_deployments), default first."""
    return list(queueing.usable_deployments(offline_too=offline_too).filter(model__name=model_name))


def pick(model_name: str, tokens: int | None = None, home: int | None = None,
         leaving: int | None = None) -> Deployment | None:
    """The replica of `model_name` that will answer soonest; `home` (a deployment id holding a conversation's
    prefix) kept unless much slower. With `leaving` (a failing replica, whose jobs move), only the other ready
    ones: a degraded one is being recovered too, and moving jobs there would move them again. None when no
    replica can answer now."""
    candidates = [deployment for deployment in replicas(model_name) if deployment.pk != leaving
                  and (leaving is None or deployment.status == DeploymentStatus.READY)]
    if not candidates:
        return None
    answering = [deployment for deployment in candidates if not not_serving_s(deployment)]
    candidates = answering or candidates  # one still loading takes its share once it answers (sharing.py)
    if transaction.get_connection().in_atomic_block:
        # A door routes and saves in one transaction: on PostgreSQL the replicas' rows are held until the job
        # is saved, so a burst's requests each see the jobs before them (SQLite's transactions take turns).
        list(Deployment.objects.select_for_update().filter(pk__in=[d.pk for d in candidates]).order_by("pk")
             .values_list("pk", flat=True))
    ranked = sorted(estimates(candidates, tokens or DEFAULT_TOKENS), key=lambda estimate: estimate.order)
    best = ranked[0]
    kept = next((estimate for estimate in ranked if estimate.deployment.pk == home), None)
    if kept is not None and keeps_prefix(kept.answer_s, best.answer_s):
        return kept.deployment
    return best.deployment


def keeps_prefix(home_s: float, best_s: float) -> bool:
    return home_s <= max(KEEP_PREFIX_RATIO * best_s, best_s + KEEP_PREFIX_EXTRA_S)


def estimates(deployments: list[Deployment], tokens: int) -> list[Estimate]:
    """Each deployment's Estimate for a request of `tokens` tokens (two queries, and one per replica whose engine
    has no fresh speed)."""
    ahead = dict.fromkeys([deployment.pk for deployment in deployments], 0)
    # Waiting batch items come after people's jobs (queueing.ORDER): they are not ahead of a request; running
    # ones hold slots like any job.
    counted = (Job.objects.filter(deployment__in=list(ahead))
               .filter(Q(status=JobStatus.RUNNING) | Q(status=JobStatus.QUEUED, batch__isnull=True))
               .values("deployment").annotate(n=Count("pk")).order_by())
    for row in counted:
        ahead[row["deployment"]] = row["n"]
    measured = {deployment.pk: measured_rate(deployment) for deployment in deployments}
    known = [rate for rate in measured.values() if rate]
    fallback = statistics.median(known) if known else DEFAULT_SPEED_TOKENS_S
    return [estimate(deployment, tokens, ahead[deployment.pk], measured[deployment.pk] or fallback)
            for deployment in deployments]


def estimate(deployment: Deployment, tokens: int, ahead: int, rate: float) -> Estimate:
    slots = whole(deployment.engine.get("slots")) or deployment.slots or 1
    wait_s = 0.0 if ahead < slots else (ahead - slots + 1) * tokens / rate
    extra = not_serving_s(deployment)
    return Estimate(deployment, slots, ahead, rate, extra, wait_s, extra + (ahead + 1) * tokens / rate)


def not_serving_s(deployment: Deployment) -> float:
    if deployment.status != DeploymentStatus.READY:  # degraded, or being prepared again (queueing.RECOVERING)
        return RECOVERING_S
    return 0.0 if deployment.engine.get("state") == "ready" else LOADING_S


def measured_rate(deployment: Deployment, now: float | None = None) -> float | None:
    """Tokens/s this replica's engine makes, all its answers together: its fresh figure, else its recent answers'
    speed; None if it has neither."""
    engine = deployment.engine
    rate, at, busy = engine.get("tokens_per_s"), engine.get("at"), whole(engine.get("busy"))
    now = time.time() if now is None else now
    if number(rate) and number(at) and now - at <= STALE_S and rate > 0 and busy:
        return float(rate)
    return recent_speed(deployment.pk)


def recent_speed(deployment_id: int) -> float | None:
    """The tokens/s its last answers were made at, all together: their tokens over the time any of them was being
    made (answers made side by side share that time; an idle gap between them is not counted)."""
    since = timezone.now() - timedelta(seconds=HISTORY_S)
    rows = (Job.objects.filter(deployment=deployment_id, status=JobStatus.SUCCEEDED, finished__gte=since,
                               completion_tokens__gt=1, first_token__isnull=False)
            .order_by("-finished").values_list("completion_tokens", "first_token", "finished")[:HISTORY_JOBS])
    tokens = sum(count - 1 for count, _, _ in rows)  # the first token comes with the prompt, not at this speed
    seconds = busy_seconds([(first, finished) for _, first, finished in rows])
    return tokens / seconds if tokens and seconds > 0 else None


def busy_seconds(spans: list) -> float:
    """How long any of the spans (start, end) lasted: their union's length."""
    total, reach = 0.0, None
    for start, end in sorted(spans):
        if reach is None or start > reach:
            total += (end - start).total_seconds()
            reach = end
        elif end > reach:
            total += (end - reach).total_seconds()
            reach = end
    return total


def conversation_home(conversation_id: int | None) -> int | None:
    """The deployment that ran the conversation's last turn: its engine holds the conversation's prefix."""
    if conversation_id is None:
        return None
    return (Job.objects.filter(conversation=conversation_id, deployment__isnull=False)
            .order_by("-created", "-pk").values_list("deployment", flat=True).first())


def routed(params: dict, model_name: str) -> dict:
    """`params` of a job routed by model: failover may move it while it waits."""
    return {**params, ROUTING: {"model": model_name, "moves": []}}


def routed_model(job: Job) -> str | None:
    routing = job.params.get(ROUTING) if isinstance(job.params, dict) else None
    return routing.get("model") if isinstance(routing, dict) else None


def with_move(params: dict, source: int, target: int, why: str) -> dict:
    """`params` with one more line in its routing's moves: from which deployment to which, why, when."""
    routing = dict(params.get(ROUTING) or {})
    line = {"from": source, "to": target, "why": why, "at": timezone.now().isoformat(timespec="seconds")}
    routing["moves"] = [*routing.get("moves", []), line]
    return {**params, ROUTING: routing}
