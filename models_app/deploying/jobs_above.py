"""What the deployment pages and API ask of the jobs that run on a deployment.

models_app/ sits below jobs/ and imports nothing of it; jobs/apps.py answers these hooks when the jobs app
starts (jobs/deployment_jobs.py). Until it has, a deployment has no jobs and cannot be verified.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterpanel.kit.hooks import Hook

if TYPE_CHECKING:
    from clusterpanel.accounts.models import User
    from models_app.models import Deployment


class NotVerifiable(ValueError):
    """The deployment cannot be verified now; the message says why, `status` what the API answers."""

    status = 409


def nothing_verifies(deployment: Deployment, user: User | None = None) -> None:
    raise NotVerifiable("Nothing here runs jobs (the jobs app is not installed), so nothing can verify it.")


# Verify the deployment in a worker: the same prompt on it and on the head alone (raises NotVerifiable).
verify: Hook[[Deployment, User | None], None] = Hook("verify", nothing_verifies)
# Its jobs (running, waiting): what stopping it ends.
in_flight: Hook[[Deployment], tuple[int, int]] = Hook("in_flight", lambda deployment: (0, 0))
# Of these job ids, those of the deployment, each as {"id", "label", "url"} for its page's engine slots.
slot_jobs: Hook[[Deployment, list[int]], list[dict]] = Hook("slot_jobs", lambda deployment, ids: [])
