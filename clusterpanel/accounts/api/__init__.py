"""/api/tokens/ and /api/limits/: a person's API tokens and the limits on people and tokens (router.py
mounts them)."""
