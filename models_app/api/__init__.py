"""/api/models/, /api/uploads/, /api/plans/, /api/deployments/: one router (models_app.api.router)."""
