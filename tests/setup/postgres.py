"""A real PostgreSQL for a test: a cluster of its own in a temporary folder, on a free port.

`postgres` refuses to run as root, so when the tests run as root (they must: simulated laptops) the
server runs as the unprivileged `postgres` user Debian's package makes, else as `nobody`.
"""

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psycopg

from clusterpanel.run.redis_server import any_free_port


class PostgresMissing(RuntimeError):
    pass


def binaries() -> Path:
    """The newest installed PostgreSQL's bin folder (Debian keeps them off PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    raise PostgresMissing("PostgreSQL is not installed: `scripts/setup.sh --test` installs it (apt: postgresql).")


def server_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresMissing("No unprivileged user to run PostgreSQL as (postgres or nobody).")


@dataclass
class Postgres:
    folder: Path
    port: int
    bin: Path
    user: pwd.struct_passwd

    @classmethod
    def start(cls, superuser: str, password: str, database: str) -> "Postgres":
        """Like the postgres image's first start from POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB."""
        user = server_user()
        folder = Path(tempfile.mkdtemp(prefix="clusterpanel-postgres-"))
        os.chown(folder, user.pw_uid, user.pw_gid)
        server = cls(folder, any_free_port(), binaries(), user)
        try:
            server.initdb(superuser, password)
            server.pg_ctl("start", "-l", str(folder / "server.log"), "-t", "60",
                          "-o", f"-p {server.port} -k {folder} -c listen_addresses=127.0.0.1")
            with psycopg.connect(host="127.0.0.1", port=server.port, user=superuser, password=password,
                                 dbname="postgres", autocommit=True) as connection:
                connection.execute(f'CREATE DATABASE "{database}"')
        except BaseException:
            server.stop()
            raise
        return server

    def initdb(self, superuser: str, password: str) -> None:
        secret = self.folder / "password"
        secret.write_text(password)
        os.chown(secret, self.user.pw_uid, self.user.pw_gid)
        self.run(self.bin / "initdb", "-D", str(self.folder / "data"), "-U", superuser, f"--pwfile={secret}",
                 "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C")
        secret.unlink()

    def pg_ctl(self, *args: str) -> None:
        self.run(self.bin / "pg_ctl", "-D", str(self.folder / "data"), "-w", *args)

    def run(self, program: Path, *args: str) -> None:
        as_user = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []} \
            if os.geteuid() == 0 else {}
        done = subprocess.run([str(program), *args], cwd=self.folder, capture_output=True, text=True,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C"}, **as_user)
        if done.returncode != 0:
            log = self.folder / "server.log"
            raise RuntimeError(f"{program.name} {' '.join(args)} failed: {done.stderr or done.stdout}"
                               f"{log.read_text()[-2000:] if log.exists() else ''}")

    def stop(self) -> None:
        """Stops the server, if it runs, and removes its folder."""
        try:
            if (self.folder / "data" / "postmaster.pid").exists():
                self.pg_ctl("stop", "-m", "fast", "-t", "60")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
