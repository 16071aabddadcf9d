"""Put the runtime bundle on a laptop, once, intact: ~/.clusterpanel/runtime/<id>/bin/ggml-rpc-server."""

from dataclasses import dataclass

from nodes.probing import platforms
from nodes.remote import ssh
from nodes.remote.transfer import Report, push_verified
from nodes.runtime import build_here
from nodes.runtime.bundle import PREBUILT, RuntimeBundle, RuntimeNotFound, find_bundle, machine

# Every path is an argument after `--` or an option's value: none can be taken for an option.
UNPACK = (
    'rm -rf -- "$2.new" && mkdir -p -- "$2.new" && tar xzf "$1" -C "$2.new" --strip-components=1 '
    '&& rm -rf -- "$2" && mv -- "$2.new" "$2" && ln -sfn -- "$(basename -- "$2")" "$(dirname -- "$2")/current"'
)
# Arguments: the folder, then pairs of (sha256, file); succeeds only if every file matches.
VERIFY = 'cd "$1" 2>/dev/null || exit 1; shift; while [ $# -gt 1 ]; do echo "$1  $2"; shift 2; done ' \
         '| sha256sum --check --status -'
# The runtime folder `current` points to when the laptop built it itself (nodes/runtime/build_here.py); else exit 1.
CURRENT_BUILD = ('name=$(readlink -- "$1/current" 2>/dev/null) && '
                 'case "$name" in built-*) echo "$name" ;; *) exit 1 ;; esac')
BUILD_HINT = ("\"Build the runtime here\" on its page builds one on the laptop itself, from the head's own "
              "llama.cpp source")


class InstallRefused(Exception):
    pass


@dataclass(frozen=True)
class Installed:
    path: str
    copied: bool
    repaired: bool
    sent: int = 0
    resumed_from: int = 0
    runtime_id: str = ""  # what Node.runtime records when it is the laptop's own build


def version(text: str | None) -> tuple[int, ...]:
    return tuple(int(part) for part in (text or "0").split(".") if part.isdigit())


def bundle_for(facts: dict, fallback: RuntimeBundle | None = None) -> RuntimeBundle:
    """The bundle for the laptop's architecture; where none was built, `fallback` (else the head's own), which
    install_runtime then refuses in words, or passes over for a build of the laptop's own."""
    try:
        return find_bundle(facts.get("arch") or None)
    except RuntimeNotFound:
        return fallback or find_bundle()


def problems(facts: dict, manifest: dict) -> list[str]:
    """Why this laptop cannot run the bundle, in plain words; empty when it can."""
    found = []
    if facts.get("os", "").lower() != manifest["os"] or facts.get("wsl") == 1:
        found.append(platforms.no_bundle_for(facts))
    if facts.get("userland_bits") == 32:
        found.append(f"its system is 32-bit on an {facts.get('arch') or 'unknown'} kernel (as Raspberry Pi OS "
                     "32-bit is); the prebuilt runtimes are 64-bit: install the 64-bit system, or build the runtime "
                     "here")
    elif machine(facts.get("arch")) != machine(manifest["arch"]):
        found.append(f"its CPU is {facts.get('arch') or 'unknown'}; the runtime is built for {manifest['arch']}"
                     + other_builds(facts))
    if facts.get("glibc") and version(facts["glibc"]) < version(manifest["min_glibc"]):
        found.append(f"its glibc is {facts['glibc']}; the runtime needs {manifest['min_glibc']} or newer "
                     "(Ubuntu 22.04, Debian 12, Fedora 35 or newer)")
    if facts.get("glibcxx") and version(facts["glibcxx"]) < version(manifest["min_glibcxx"]):
        found.append(f"its libstdc++ offers GLIBCXX_{facts['glibcxx']}; the runtime needs "
                     f"GLIBCXX_{manifest['min_glibcxx']} (GCC 12's) or newer")
    return found


def other_builds(facts: dict) -> str:
    """For a Linux laptop of another architecture: whether the head can build a bundle for it."""
    arch = machine(facts.get("arch"))
    if facts.get("os", "").lower() != "linux" or not arch:
        return ""
    if arch in PREBUILT:
        return f", and {PREBUILT[arch]} on the head builds the {arch} one"
    return f", and prebuilt runtimes are for {' and '.join(PREBUILT)} laptops only"


def runtime_path(install_dir: str, bundle: RuntimeBundle) -> str:
    return f"{install_dir.rstrip('/')}/runtime/{bundle.sha256[:12]}"


def is_intact(target: ssh.SSHTarget, path: str, bundle: RuntimeBundle) -> bool:
    pairs = [part for name, digest in bundle.manifest["files"].items() for part in (digest, name)]
    return ssh.sh(target, VERIFY, ssh.remote_path(path), *pairs).exit_status == 0


def install_runtime(target: ssh.SSHTarget, install_dir: str, bundle: RuntimeBundle, facts: dict,
                    report: Report, replace_built: bool = False) -> Installed:
    """The bundle, unless the laptop runs a build of its own that is whole and speaks the head's protocol (kept
    but where `replace_built` and the bundle can run here: an admin asking for the bundle)."""
    reasons = problems(facts, bundle.manifest)
    if not (replace_built and not reasons) and (kept := own_build(target, install_dir, bundle, report)):
        return kept
    if reasons:
        raise InstallRefused("This laptop cannot run the llama.cpp runtime: " + "; ".join(reasons) +
                             f". {BUILD_HINT}.")
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


def own_build(target: ssh.SSHTarget, install_dir: str, bundle: RuntimeBundle, report: Report) -> Installed | None:
    runtime = f"{install_dir.rstrip('/')}/runtime"
    found = ssh.sh(target, CURRENT_BUILD, ssh.remote_path(runtime))
    name = found.stdout.strip()
    if found.exit_status != 0 or not name:
        return None
    path = f"{runtime}/{name}"
    try:
        if not build_here.is_intact(target, path):
            return None
        build_here.check(target, path, bundle.rpc_protocol)
    except build_here.BuildFailed:
        return None
    report(f"The laptop runs the runtime it built itself ({name}), whole and speaking the head's RPC protocol "
           f"{bundle.rpc_protocol}: kept.")
    return Installed(path, copied=False, repaired=False, runtime_id=name[:12])
