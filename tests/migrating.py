"""Taking the tests' database back to an older migration, to check what an upgrade does to data."""

import contextlib

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


@contextlib.contextmanager
def migrated_back(target: list[tuple[str, str]]):
    """The database at `target` for the body, then at the newest migrations again, its id sequences as they
    were: SQLite rebuilds a table to change it, and a rebuilt empty table would hand out ids from 1 again,
    which later tests' jobs would share with Redis streams of earlier ones."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, seq FROM sqlite_sequence")
        sequences = cursor.fetchall()
    try:
        MigrationExecutor(connection).migrate(target)
        yield MigrationExecutor(connection).loader.project_state(target).apps
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        with connection.cursor() as cursor:
            for name, seq in sequences:
                cursor.execute("UPDATE sqlite_sequence SET seq = MAX(seq, %s) WHERE name = %s", [seq, name])
