"""The one module that speaks SSH (paramiko). No database access in here.

Host keys are always pinned: a target carries the key its host must present,
and a host presenting any other key is refused (`HostKeyMismatch`). There is
no silent trust on first use; `host_key_of()` fetches a key for an admin to
confirm.
"""

import base64
import errno
import hashlib
import io
import shlex
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from nodes.remote import logins

CONNECT_TIMEOUT = 10.0
COMMAND_TIMEOUT = 60.0
KEY_CLASSES = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)
RSA_SIGNATURES = ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")  # one RSA key, whichever a server still signs with


class SSHError(Exception):
    """`permanent` errors (bad key, changed host key) will not heal by retrying."""

    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class HostKeyMismatch(SSHError):
    def __init__(self, message: str, presented: str) -> None:
        super().__init__(message, permanent=True)
        self.presented = presented


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to log in. The secrets stay out of its repr (DEBUG pages, logs, tracebacks)."""

    host: str
    username: str
    host_key: str  # "ssh-ed25519 AAAA..." as in known_hosts, without the host name
    port: int = 22
    private_key: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Result:
    exit_status: int
    stdout: str
    stderr: str


def fingerprint(key_line: str) -> str:
    """OpenSSH's SHA256 fingerprint of a public key line."""
    blob = base64.b64decode(key_line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def generate_key_pair(comment: str) -> tuple[str, str]:
    """A new ed25519 key pair: (private key in OpenSSH format, public key line)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, f"{public.decode()} {comment}"


def load_private_key(text: str) -> paramiko.PKey:
    for cls in KEY_CLASSES:
        try:
            return cls.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError):
            continue
    raise SSHError("The private key is not an unencrypted Ed25519, ECDSA or RSA key.", permanent=True)


def _pin_host_key(client: paramiko.SSHClient, target: SSHTarget) -> None:
    kind, data = target.host_key.split()[:2]
    name = target.host if target.port == 22 else f"[{target.host}]:{target.port}"
    client.get_host_keys().add(name, kind, paramiko.PKey.from_type_string(kind, base64.b64decode(data)))


def connect(target: SSHTarget, timeout: float = CONNECT_TIMEOUT) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    _pin_host_key(client, target)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    pkey = load_private_key(target.private_key) if target.private_key else None
    try:
        client.connect(
            target.host, port=target.port, username=target.username, pkey=pkey,
            password=target.password, timeout=timeout, banner_timeout=timeout,
            auth_timeout=timeout, allow_agent=False, look_for_keys=False,
        )
    except paramiko.BadHostKeyException as exc:
        client.close()
        presented = f"{exc.key.get_name()} {exc.key.get_base64()}"
        raise HostKeyMismatch(
            f"{target.host} presented host key {fingerprint(presented)}, not the pinned "
            f"{fingerprint(target.host_key)}: refusing to connect.", presented) from None
    except paramiko.AuthenticationException:
        client.close()
        raise SSHError(f"{target.username}@{target.host} refused our key or password.", permanent=True) from None
    except (OSError, paramiko.SSHException) as exc:
        client.close()
        raise SSHError(f"Cannot reach {target.host}:{target.port}: {why_unreachable(exc)}") from None
    return client


# What the operating system's connection errors mean for a laptop, in the words an admin acts on.
UNREACHABLE = {
    errno.EHOSTUNREACH: "there is no route to it. Is the laptop switched on, awake and on this network?",
    errno.ENETUNREACH: "the panel has no route to that network. Check the address.",
    errno.ECONNREFUSED: "it refused the connection: nothing listens on that port. Is its SSH server running, "
                        "and is this its SSH port?",
    errno.ECONNRESET: "it closed the connection at once. A firewall, or an SSH server refusing the panel?",
    errno.ETIMEDOUT: "it did not answer. Is the laptop switched on and awake, or does a firewall drop the panel?",
}
NO_SUCH_NAME = "no machine has that name here (it does not resolve). Check the spelling, or give its IP address."


def why_unreachable(exc: BaseException) -> str:
    """Plain words for a failed connection, where Python says `[Errno 113] No route to host`."""
    if isinstance(exc, socket.gaierror):
        return NO_SUCH_NAME
    if isinstance(exc, TimeoutError | socket.timeout):
        return UNREACHABLE[errno.ETIMEDOUT]
    if isinstance(exc, OSError) and exc.errno in UNREACHABLE:
        return UNREACHABLE[exc.errno]
    if isinstance(exc, paramiko.SSHException) and "banner" in str(exc):
        return "something answers on that port, but not an SSH server. Is this its SSH port?"
    return str(exc) or type(exc).__name__


_pool: dict[SSHTarget, paramiko.SSHClient] = {}
_pool_lock = threading.Lock()  # guards the two dicts; held for moments, never across a connect
_connecting: dict[SSHTarget, threading.Lock] = {}  # one per target: a target is connected to once at a time


def pooled(target: SSHTarget) -> paramiko.SSHClient:
    """A live connection to `target`, reused across calls in this process.

    A connect can take its whole timeout (a laptop that hangs), so it holds only
    its own target's lock: other laptops' callers go on meanwhile, and callers of
    the same target wait for that one connection instead of opening a second.
    """
    with _target_lock(target):
        client = _live(target)
        if client is None:
            client = connect(target)
            client.get_transport().set_keepalive(15)
            with _pool_lock:
                _pool[target] = client
        return client


def _target_lock(target: SSHTarget) -> threading.Lock:
    with _pool_lock:
        return _connecting.setdefault(target, threading.Lock())


def _live(target: SSHTarget) -> paramiko.SSHClient | None:
    """The pooled connection if it still works; a dead one is closed and dropped."""
    with _pool_lock:
        client = _pool.get(target)
        transport = client.get_transport() if client else None
        if client is None or (transport is not None and transport.is_active()):
            return client
        del _pool[target]
    client.close()
    return None


def forget(target: SSHTarget) -> None:
    """Drop the pooled connection, e.g. after it failed or the target changed."""
    with _pool_lock:
        client = _pool.pop(target, None)
    if client is not None:
        client.close()


def remote_path(path: str) -> str:
    """SFTP and quoted commands see no `~`: a path under home becomes relative to it.
    A path that would start with '-' gets a './' so no command can take it for an option."""
    path = path[2:] if path.startswith("~/") else ("." if path == "~" else path)
    return f"./{path}" if path.startswith("-") else path


def run(target: SSHTarget, argv: list[str], timeout: float = COMMAND_TIMEOUT, feed: str = "") -> Result:
    """Run `argv` (each part quoted) in the login user's home, `feed` on its standard input; raises SSHError on
    failure to run. A long list goes through `feed`: one argument of a command line holds at most 128 KiB."""
    try:
        stdin, stdout, stderr = pooled(target).exec_command(shlex.join(argv), timeout=timeout)
        if feed:
            stdin.write(feed.encode())
        stdin.close()  # and the end of input: a script reading it stops there
        out, err = stdout.read().decode(errors="replace"), stderr.read().decode(errors="replace")
        return Result(stdout.channel.recv_exit_status(), out, err)
    except TimeoutError:
        forget(target)
        raise SSHError(f"`{argv[0]}` on {target.host} did not finish within {timeout:.0f} s.") from None
    except (OSError, EOFError, paramiko.SSHException) as exc:
        forget(target)
        raise SSHError(f"Lost the connection to {target.host} running `{argv[0]}`: {exc}") from None


def sh(target: SSHTarget, script: str, *args: str, timeout: float = COMMAND_TIMEOUT, feed: str = "") -> Result:
    """Run a fixed shell script; values reach it only as quoted positional arguments ($1, $2...) or `feed`."""
    return run(target, ["sh", "-c", script, "sh", *args], timeout=timeout, feed=feed)


@dataclass(frozen=True)
class Pushed:
    size: int
    sent: int
    resumed_from: int


def push(target: SSHTarget, local: Path, remote: str, progress: Callable[[int, int], None] | None = None,
         chunk: int = 1 << 20, start: int = 0, length: int | None = None) -> Pushed:
    """Copy `local` (or its `length` bytes from `start`) to `remote` over SFTP through `remote`.part,
    resuming a part left by an earlier try; `remote` appears whole or not at all."""
    size = local.stat().st_size - start if length is None else length
    remote, partial = remote_path(remote), remote_path(remote) + ".part"
    try:
        with pooled(target).open_sftp() as sftp:
            offset = _partial_size(sftp, partial)
            offset = offset if offset <= size else 0
            with open(local, "rb") as source, sftp.open(partial, "ab" if offset else "wb") as dest:
                dest.set_pipelined(True)
                source.seek(start + offset)
                done = offset
                while done < size and (block := source.read(min(chunk, size - done))):
                    dest.write(block)
                    done += len(block)
                    if progress:
                        progress(done, size)
            if done != size:
                raise OSError(f"{local.name} ended {size - done} bytes early")
            sftp.posix_rename(partial, remote)
    except (OSError, EOFError, paramiko.SSHException) as exc:
        forget(target)
        raise SSHError(f"Copying {local.name} to {target.host}:{remote} failed: {exc}") from None
    return Pushed(size, size - offset, offset)


def _partial_size(sftp: paramiko.SFTPClient, path: str) -> int:
    try:
        return sftp.stat(path).st_size or 0
    except FileNotFoundError:
        return 0


def host_key_of(host: str, port: int = 22, timeout: float = CONNECT_TIMEOUT, prefer: str = "") -> str:
    """The key a host presents, for an admin to compare with the laptop's own before trusting it; `prefer`: the
    key type to ask for first ("ssh-ed25519"), so a host with several keys shows the kind that was pinned."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            transport = paramiko.Transport(sock)
            try:
                if prefer:
                    first = RSA_SIGNATURES if prefer == "ssh-rsa" else (prefer,)
                    options = transport.get_security_options()
                    options.key_types = [*first, *(kind for kind in options.key_types if kind not in first)]
                transport.start_client(timeout=timeout)
                key = transport.get_remote_server_key()
            finally:
                transport.close()
    except (OSError, paramiko.SSHException, EOFError) as exc:
        raise SSHError(f"Cannot reach {host}:{port}: {why_unreachable(exc)}") from None
    return f"{key.get_name()} {key.get_base64()}"


@dataclass
class Forward:
    """An OpenSSH `ssh -L` child process: 127.0.0.1:local_port on the head reaches remote_port on the laptop."""

    local_port: int
    process: subprocess.Popen
    host: str = ""  # the laptop's address it was opened to: a laptop that moves needs a new one

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def forward(target: SSHTarget, remote_port: int, local_port: int, timeout: float = CONNECT_TIMEOUT) -> Forward:
    """Open a port forward with the system OpenSSH client: far faster per packet than a Python pump.

    The key and the pinned host key go to 0600 files that are removed once the
    connection is up; OpenSSH refuses any other host key (StrictHostKeyChecking).
    """
    if not target.private_key:
        raise SSHError("A port forward needs a key; this target only has a password.", permanent=True)
    problem = logins.user_problem(target.username) or logins.host_problem(target.host)
    if problem:
        raise SSHError(f"Refusing to run ssh for this laptop: {problem}", permanent=True)
    with tempfile.TemporaryDirectory(prefix="clusterpanel-ssh-") as folder:
        key, known = Path(folder) / "key", Path(folder) / "known_hosts"
        key.touch(mode=0o600)
        key.write_text(target.private_key if target.private_key.endswith("\n") else target.private_key + "\n")
        name = target.host if target.port == 22 else f"[{target.host}]:{target.port}"
        known.write_text(f"{name} {target.host_key}\n")
        argv = forward_argv(target, remote_port, local_port, key, known, timeout)
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True, start_new_session=True)
        if not _wait_listening(local_port, process, timeout + 2):
            process.kill()
            error = process.communicate()[1].strip()
            raise SSHError(f"The SSH port forward to {target.host} failed: {error or 'no answer'}")
    return Forward(local_port, process, target.host)


def forward_argv(target: SSHTarget, remote_port: int, local_port: int, key: Path, known: Path,
                 timeout: float) -> list[str]:
    """The `ssh -L` command line. The user and port go as values of -l and -p, and the host comes after
    `--`, so none of them can be read as an option (`-oProxyCommand=...` would run a command here)."""
    # A session with a tty, not -N: only then does OpenSSH set TCP_NODELAY, and every
    # token makes many small round trips (bench/tunnel_vs_direct.py: p99 44 ms -> 0.2 ms).
    # -F /dev/null: no ssh_config of this machine's user can add a ProxyCommand or `Match exec` that
    # expands the host (%h) into a command; everything the tunnel needs is on this line.
    return ["ssh", "-F", "/dev/null", "-tt", "-L", f"127.0.0.1:{int(local_port)}:127.0.0.1:{int(remote_port)}",
            "-i", str(key),
            "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
            "-o", "ExitOnForwardFailure=yes", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
            "-o", f"ConnectTimeout={int(timeout)}", "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR",
            "-l", target.username, "-p", str(int(target.port)), "--", target.host, "exec sleep 2147483647"]


def _wait_listening(port: int, process: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def stream(target: SSHTarget, script: str, *args: str, idle_timeout: float = 5.0) -> Iterator[str]:
    """Lines printed by a long-running shell script, as they come; SSHError when it goes quiet or drops."""
    try:
        channel = pooled(target).get_transport().open_session(timeout=CONNECT_TIMEOUT)
        channel.settimeout(idle_timeout)
        channel.exec_command(shlex.join(["sh", "-c", script, "sh", *args]))
        reader = channel.makefile("r")
    except (OSError, EOFError, paramiko.SSHException) as exc:
        forget(target)
        raise SSHError(f"Cannot start a stream on {target.host}: {exc}") from None
    try:
        while True:
            try:
                line = reader.readline()
            except TimeoutError:
                raise SSHError(f"{target.host} sent nothing for {idle_timeout:.0f} s.") from None
            except (OSError, EOFError, paramiko.SSHException) as exc:
                forget(target)
                raise SSHError(f"The stream from {target.host} broke: {exc}") from None
            if not line:
                raise SSHError(f"The stream from {target.host} ended.")
            yield line.rstrip("\n")
    finally:
        channel.close()


def local_address(target: SSHTarget) -> str:
    """The head's address as this laptop sees it: where the laptop can connect back to."""
    return pooled(target).get_transport().sock.getsockname()[0]
