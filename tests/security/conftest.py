"""Fixtures the hostile cases share with the job tests: `ready`, a deployment row that takes jobs (no engine);
`cluster`, the bundled model really deployed across simulated laptops with its engine; and the API doors'
`token` and `no_redis`."""

import pytest

from tests.jobs.conftest import bearer, cluster, cluster_ctx, cluster_slots, ready  # noqa: F401 (fixtures)
from tests.services import redis_down


@pytest.fixture
def token(bob) -> dict:
    """`bob`'s bearer header, for the API doors."""
    return bearer(bob)


@pytest.fixture
def no_redis(ready, settings):  # noqa: F811 (the fixture imported above)
    """`ready`, and Redis stopped for the test: a valid request meets the outage (a 503), never a queue."""
    settings.REDIS_OUTAGE_S = 1
    with redis_down():
        yield
