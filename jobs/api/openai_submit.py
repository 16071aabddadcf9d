"""One /v1 request made a job: checked, admitted under its sender's limits, routed to a deployment (which may wake
an on-call model), and queued."""

from django.db import transaction

from jobs.api import embeddings, inputs, openai_api
from jobs.api.inputs import InputError
from jobs.api.openai_api import Request
from jobs.models import Job
from jobs.queue import admission, queueing, routing

REDIS_LOST = "The panel lost its connection to Redis, which carries jobs and their answers"


def submit(user, token, wanted: Request) -> tuple[Job, str]:
    """The request checked, admitted under its limits, then routed (which may wake an on-call model: nothing is
    loaded for a request refused), and queued. A deployment stopped between the routing and the queueing (an
    idle one unloaded) is routed around once."""
    checked = openai_api.generation_params(wanted, None)  # all but the context's bound, known once routed
    tokens = checked.max_tokens if "max_tokens" in wanted.generation and not wanted.ceiling else None
    admission.admit(user, token)
    for last in (False, True):
        try:
            with transaction.atomic():  # routed and saved at once: each request of a burst sees those before it
                target = inputs.target_for(wanted.model, tokens)
                if wanted.ceiling:
                    wanted.generation["max_tokens"] = min(checked.max_tokens, target.deployment.ctx)
                generation = openai_api.generation_params(wanted, target.deployment.ctx).as_dict()
                if wanted.inputs:
                    embeddings.fits(wanted, target.deployment.model)
                job = Job(kind=wanted.kind, deployment=target.deployment, user=user, api_token=token,
                          messages=wanted.messages, prompt=wanted.prompt, inputs=wanted.inputs,
                          params=routing.routed(generation, target.model) if target.model else generation)
                queueing.submit(job)
        except queueing.DeploymentGone as exc:
            if last or target.model is None:
                raise InputError(str(exc), "model", "model_not_available", status=503) from None
            continue
        except queueing.QueueError as exc:
            raise InputError(str(exc), "model", "model_not_available", status=503) from None
        except queueing.QueueDown as exc:
            raise InputError(f"{REDIS_LOST} ({exc}); nothing was queued. Try again in a moment.", None,
                             "service_unavailable", status=503) from None
        return job, wanted.model or target.deployment.model.name
