"""/api/models/, /api/uploads/, /api/plans/ and /api/deployments/ as one router."""

from ninja import Router

from models_app.api import deployments, library, oncall, plans, uploads

router = Router()
router.add_router("/models/", library.router, tags=["models"])
router.add_router("/models/", oncall.router, tags=["models"])
router.add_router("/uploads/", uploads.router, tags=["models"])
router.add_router("/plans/", plans.router, tags=["plans"])
router.add_router("/deployments/", deployments.router, tags=["deployments"])
