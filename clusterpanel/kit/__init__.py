"""The toolkit every app imports: the API's shapes and errors (apikit), pushing to browsers (broadcast), the
consumers' base, confirm pages, encryption (crypto), units and natural order, Redis outages, hooks, processes
(procs), the Celery app and its worker fixes, settings helpers (env). Imports no app and nothing above it."""
