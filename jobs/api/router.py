"""/api/jobs/, /api/batches/ and /api/usage/ as one router (/v1/, OpenAI's shape, is openai_urls.py)."""

from ninja import Router

from jobs.api import batches, usage, views

router = Router()
router.add_router("/jobs/", views.router, tags=["jobs"])
router.add_router("/batches/", batches.router, tags=["batches"])
router.add_router("/usage/", usage.router, tags=["usage"])
