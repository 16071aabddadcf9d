"""Fixtures the hostile cases share with the job tests: `ready`, a deployment row that takes jobs (no engine)."""

from tests.jobs.conftest import ready  # noqa: F401 (a fixture)
