"""/api/nodes/ as one router: selections and scans before /<name>/, which would take their paths."""

from ninja import Router

from nodes.api import actions, bulk, laptops, scans

router = Router()
router.add_router("/actions/", bulk.router, tags=["laptops"])
router.add_router("/scans/", scans.router, tags=["laptops"])
router.add_router("/", laptops.router, tags=["laptops"])
router.add_router("/", actions.router, tags=["laptops"])
