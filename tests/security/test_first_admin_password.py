"""The first admin's password, when the panel chose it, never reaches the output of `createadmin` (docker
compose runs it and keeps its output in `docker compose logs` for good): it is written to a file in the data
folder that only its owner can read, and that file goes once the password has been changed."""

import os
import stat
import subprocess
import sys

from clusterpanel.accounts.models import User
from tests.conftest import ROOT, child_env


def createadmin(data_dir) -> str:
    """`manage.py createadmin` as docker compose's `migrate` runs it: everything it prints."""
    env = {key: value for key, value in child_env().items() if key != "ADMIN_PASSWORD"}
    done = subprocess.run([sys.executable, "manage.py", "createadmin"], cwd=ROOT,
                          env={**env, "DATA_DIR": str(data_dir)}, capture_output=True, text=True, timeout=120,
                          check=True)
    return done.stdout + done.stderr


def test_it_writes_the_password_to_a_file_only_its_owner_reads_and_never_prints_it(transactional_db, tmp_path):
    output = createadmin(tmp_path)
    secret = tmp_path / "first_admin_password"
    password = secret.read_text().strip()
    assert User.objects.get(username="admin").check_password(password)
    assert password not in output and str(secret) in output, output
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.stat().st_uid == os.getuid()


def test_it_removes_the_file_once_the_password_was_changed(transactional_db, tmp_path):
    createadmin(tmp_path)
    assert "already exists" in createadmin(tmp_path), "a second run creates nobody"
    assert (tmp_path / "first_admin_password").exists(), "the password still opens the account: kept"
    admin = User.objects.get(username="admin")
    admin.set_password("a new password of the admin's own")
    admin.save()
    createadmin(tmp_path)
    assert not (tmp_path / "first_admin_password").exists()
