"""/api/models/, /api/uploads/, /api/plans/, /api/deployments/: one router (router.py) the shell mounts."""
