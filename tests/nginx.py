"""A real nginx for tests, running a site's configuration (what goes in conf.d/ or sites-enabled/) as written.

The site is put inside a whole nginx.conf whose files (pid, logs, request bodies on their way) stay in the
test's folder, and nginx runs in the foreground. Only the addresses it listens on and passes to are the
test's to choose.
"""

import os
import shutil
import subprocess
from pathlib import Path

TEMPORARY = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    assert found, "nginx is not installed (scripts/setup.sh --test installs it)"
    return found


def main_config(folder: Path, site: str) -> Path:
    """nginx.conf in `folder` with `site` in its http block; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    temporary = "\n".join(f"    {kind}_temp_path {folder / kind};" for kind in TEMPORARY)
    # As root nginx's workers would be `nobody`, who cannot reach a test's folder.
    user = "user root;\n" if os.geteuid() == 0 else ""
    path = folder / "nginx.conf"
    path.write_text(f"{user}pid {folder / 'nginx.pid'};\nerror_log {folder / 'error.log'} warn;\n"
                    f"events {{ worker_connections 256; }}\n"
                    f"http {{\n    access_log {folder / 'access.log'};\n{temporary}\n{site}\n}}\n")
    return path


def command(folder: Path, site: str, arguments: list[str] | None = None) -> list[str]:
    """The command line that runs `site`; `arguments` are nginx's others (default: in the foreground)."""
    config = main_config(folder, site)
    return [binary(), *(arguments if arguments is not None else ["-g", "daemon off;"]),
            "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(config)]


def check(folder: Path, site: str) -> subprocess.CompletedProcess:
    """`nginx -t`: does nginx take the configuration?"""
    return subprocess.run(command(folder, site, ["-t"]), capture_output=True, text=True, timeout=30)


def log(folder: Path) -> str:
    path = folder / "error.log"
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""
