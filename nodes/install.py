"""Put the runtime bundle on a laptop, once, intact: ~/.clusterpanel/runtime/<id>/bin/ggml-rpc-server."""

from dataclasses import dataclass

from nodes import ssh
from nodes.runtime import RuntimeBundle
from nodes.transfer import Report, push_verified

# Every path is an argument after `--` or an option's value: none can be taken for an option.
UNPACK = (
    'rm -rf -- "$2.new" && mkdir -p -- "$2.new" && tar xzf "$1" -C "$2.new" --strip-components=1 '
    '&& rm -rf -- "$2" && mv -- "$2.new" "$2" && ln -sfn -- "$(basename -- "$2")" "$(dirname -- "$2")/current"'
)
# Arguments: the folder, then pairs of (sha256, file); succeeds only if every file matches.
VERIFY = 'cd "$1" 2>/dev/null || exit 1; shift; while [ $# -gt 1 ]; do echo "$1  $2"; shift 2; done ' \
         '| sha256sum --check --status -'


class InstallRefused(Exception):
    pass


@dataclass(frozen=True)
class Installed:
    path: str
    copied: bool
    repaired: bool
    sent: int = 0
    resumed_from: int = 0


def version(text: str | None) -> tuple[int, ...]:
    return tuple(int(part) for part in (text or "0").split(".") if part.isdigit())


def problems(facts: dict, manifest: dict) -> list[str]:
    """Why this laptop cannot run the bundle, in plain words; empty when it can."""
    found = []
    if facts.get("os", "").lower() != manifest["os"]:
        found.append(f"it runs {facts.get('os') or 'an unknown OS'}; the runtime is built for Linux")
    if facts.get("arch") != manifest["arch"]:
        found.append(f"its CPU is {facts.get('arch') or 'unknown'}; the runtime is built for {manifest['arch']}")
    if facts.get("glibc") and version(facts["glibc"]) < version(manifest["min_glibc"]):
        found.append(f"its glibc is {facts['glibc']}; the runtime needs {manifest['min_glibc']} or newer "
                     "(Ubuntu 22.04, Debian 12, Fedora 35 or newer)")
    if facts.get("glibcxx") and version(facts["glibcxx"]) < version(manifest["min_glibcxx"]):
        found.append(f"its libstdc++ offers GLIBCXX_{facts['glibcxx']}; the runtime needs "
                     f"GLIBCXX_{manifest['min_glibcxx']} (GCC 12's) or newer")
    return found


def runtime_path(install_dir: str, bundle: RuntimeBundle) -> str:
    return f"{install_dir.rstrip('/')}/runtime/{bundle.sha256[:12]}"


def is_intact(target: ssh.SSHTarget, path: str, bundle: RuntimeBundle) -> bool:
    pairs = [part for name, digest in bundle.manifest["files"].items() for part in (digest, name)]
    return ssh.sh(target, VERIFY, ssh.remote_path(path), *pairs).exit_status == 0


def install_runtime(target: ssh.SSHTarget, install_dir: str, bundle: RuntimeBundle, facts: dict,
                    report: Report) -> Installed:
    reasons = problems(facts, bundle.manifest)
    if reasons:
        raise InstallRefused("This laptop cannot run the llama.cpp runtime: " + "; ".join(reasons) + ".")
    path = runtime_path(install_dir, bundle)
    existed = ssh.sh(target, '[ -d "$1" ]', ssh.remote_path(path)).exit_status == 0
    if existed and is_intact(target, path, bundle):
        report("The runtime is already installed and intact.")
        return Installed(path, copied=False, repaired=False)
    tarball = f"{install_dir.rstrip('/')}/downloads/{bundle.tarball.name}"
    copied = push_verified(target, bundle.tarball, tarball, bundle.sha256, report)
    report("Unpacking the runtime.")
    unpacked = ssh.sh(target, UNPACK, ssh.remote_path(tarball), ssh.remote_path(path))
    if unpacked.exit_status != 0 or not is_intact(target, path, bundle):
        raise InstallRefused(f"Unpacking the runtime failed on the laptop: {unpacked.stderr.strip() or 'files differ'}")
    report("Runtime installed and verified.")
    return Installed(path, copied=not copied.skipped, repaired=existed, sent=copied.sent,
                     resumed_from=copied.resumed_from)
