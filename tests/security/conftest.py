"""Fixtures the hostile cases share with the job tests: `ready`, a deployment row that takes jobs (no engine);
`cluster`, the bundled model really deployed across simulated laptops with its engine."""

from tests.jobs.conftest import cluster, cluster_ctx, cluster_slots, ready  # noqa: F401 (fixtures)
