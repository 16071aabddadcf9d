"""/api/tokens/ and /api/limits/ as one router."""

from ninja import Router

from clusterpanel.accounts.api import limits, tokens

router = Router()
router.add_router("/tokens/", tokens.router, tags=["tokens"])
router.add_router("/limits/", limits.router, tags=["limits"])
