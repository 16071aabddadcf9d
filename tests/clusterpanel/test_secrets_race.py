"""Processes that start together on a first boot (web, worker, supervisor under docker compose) all read
the same complete secret key and Fernet key: none reads a half-written file, none fails because another
process made the file first. Also where the folder takes no hard links (some FUSE, SMB and bind mounts)."""

import errno
import multiprocessing
import os
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from clusterpanel.kit.crypto import stored_key
from clusterpanel.kit.env import EmptySecretFile, env_secret

PROCESSES = 8
ROUNDS = 100


def secret_key(path: Path) -> str:
    return env_secret("CLUSTERPANEL_TEST_UNSET_SECRET", path)


def race(read, folders: list[Path], barrier, results, hard_links: bool) -> None:
    """One starting process: in every round, waits for all the others, then reads the secret at once."""
    if not hard_links:
        os.link = no_hard_links
    for number, folder in enumerate(folders):
        barrier.wait()
        try:
            results.put((number, read(folder / "secret")))
        except Exception as exc:  # what the process would have died of
            results.put((number, f"failed: {type(exc).__name__}: {exc}"))


def race_rounds(read, tmp_path: Path, hard_links: bool = True) -> dict[int, list[str]]:
    """What each of PROCESSES real processes read, per round; each round starts from an empty folder. Spawned,
    not forked: a fork of the test process, which has run hundreds of tests and holds their threads, can
    inherit a lock another thread held and hang before it reads anything."""
    context = multiprocessing.get_context("spawn")
    folders = [tmp_path / str(number) for number in range(ROUNDS)]
    barrier, results = context.Barrier(PROCESSES), context.Queue()
    processes = [context.Process(target=race, args=(read, folders, barrier, results, hard_links))
                 for _ in range(PROCESSES)]
    for process in processes:
        process.start()
    try:
        read_values = [results.get(timeout=60) for _ in range(PROCESSES * ROUNDS)]
    finally:
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
    by_round: dict[int, list[str]] = {}
    for number, value in read_values:
        by_round.setdefault(number, []).append(value)
    return by_round


def assert_one_complete_value(by_round: dict[int, list[str]], tmp_path: Path) -> None:
    for number, values in sorted(by_round.items()):
        assert len(set(values)) == 1, f"round {number}: the processes read {sorted(set(values))}"
        assert values[0] and not values[0].startswith("failed:"), f"round {number}: {values[0]!r}"
        assert (tmp_path / str(number) / "secret").read_text().strip() == values[0]
        assert [path.name for path in (tmp_path / str(number)).iterdir()] == ["secret"], "no temporary file left"


def test_it_gives_every_racing_process_the_same_secret_key(tmp_path):
    by_round = race_rounds(secret_key, tmp_path)
    assert_one_complete_value(by_round, tmp_path)
    assert all(len(values[0]) >= 50 for values in by_round.values())


def test_it_gives_every_racing_process_the_same_fernet_key(tmp_path):
    by_round = race_rounds(stored_key, tmp_path)
    assert_one_complete_value(by_round, tmp_path)
    for values in by_round.values():
        Fernet(values[0])  # a whole key, not a prefix of one


def no_hard_links(*args, **kwargs):
    raise PermissionError(errno.EPERM, "Operation not permitted")


def test_it_gives_every_racing_process_the_same_secret_key_where_hard_links_fail(tmp_path):
    by_round = race_rounds(secret_key, tmp_path, hard_links=False)
    assert_one_complete_value(by_round, tmp_path)


def test_it_says_what_to_delete_when_an_interrupted_first_start_left_its_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "link", no_hard_links)
    (tmp_path / ".secret.lock").touch()  # its holder died before renaming the key into place
    with pytest.raises(EmptySecretFile, match="delete it"):
        secret_key(tmp_path / "secret")
