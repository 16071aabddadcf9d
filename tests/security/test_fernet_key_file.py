"""FERNET_KEY_FILE puts the key of the secrets at rest outside the data folder, so a backup of the data folder
(database and all) does not also hold the key that opens the SSH keys and passwords in it."""

import subprocess
import sys

from tests.conftest import ROOT

ENCRYPT = "import django; django.setup(); from clusterpanel.kit.crypto import encrypt; print(encrypt('a secret'))"


def test_it_keeps_the_key_where_fernet_key_file_says(tmp_path):
    data, keys = tmp_path / "data", tmp_path / "keys"
    subprocess.run([sys.executable, "-c", ENCRYPT], cwd=ROOT, check=True, capture_output=True, timeout=60, env={
        "PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "clusterpanel.settings", "DATA_DIR": str(data),
        "FERNET_KEY_FILE": str(keys / "fernet.key")})
    assert (keys / "fernet.key").stat().st_mode & 0o077 == 0, "readable by its owner only"
    assert not list(data.rglob("fernet.key"))
