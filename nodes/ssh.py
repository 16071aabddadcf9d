"""The one module that speaks SSH (paramiko). No database access in here.

Host keys are always pinned: a target carries the key its host must present,
and a host presenting any other key is refused (`HostKeyMismatch`). There is
no silent trust on first use; `host_key_of()` fetches a key for an admin to
confirm.
"""

import base64
import hashlib
import io
import shlex
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import paramiko

CONNECT_TIMEOUT = 10.0
COMMAND_TIMEOUT = 60.0
KEY_CLASSES = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)


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
    host: str
    username: str
    host_key: str  # "ssh-ed25519 AAAA..." as in known_hosts, without the host name
    port: int = 22
    private_key: str | None = None
    password: str | None = None


@dataclass(frozen=True)
class Result:
    exit_status: int
    stdout: str
    stderr: str


def fingerprint(key_line: str) -> str:
    """OpenSSH's SHA256 fingerprint of a public key line."""
    blob = base64.b64decode(key_line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


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
        raise SSHError(f"Cannot reach {target.host}:{target.port}: {exc or type(exc).__name__}") from None
    return client


def run(target: SSHTarget, argv: list[str], timeout: float = COMMAND_TIMEOUT,
        client: paramiko.SSHClient | None = None) -> Result:
    """Run `argv` (each part quoted) on the target; raises SSHError on timeout."""
    owned = client is None
    client = client or connect(target)
    try:
        stdin, stdout, stderr = client.exec_command(shlex.join(argv), timeout=timeout)
        stdin.close()
        out, err = stdout.read().decode(errors="replace"), stderr.read().decode(errors="replace")
        return Result(stdout.channel.recv_exit_status(), out, err)
    except TimeoutError:
        raise SSHError(f"`{argv[0]}` on {target.host} did not finish within {timeout:.0f} s.") from None
    finally:
        if owned:
            client.close()


def push(target: SSHTarget, local: Path, remote: str,
         progress: Callable[[int, int], None] | None = None,
         client: paramiko.SSHClient | None = None) -> None:
    owned = client is None
    client = client or connect(target)
    try:
        with client.open_sftp() as sftp:
            sftp.put(str(local), remote, callback=progress)
    except (OSError, paramiko.SSHException) as exc:
        raise SSHError(f"Copying {local.name} to {target.host}:{remote} failed: {exc}") from None
    finally:
        if owned:
            client.close()


def host_key_of(host: str, port: int = 22, timeout: float = CONNECT_TIMEOUT) -> str:
    """The key a host presents, for an admin to compare with the laptop's own before trusting it."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            transport = paramiko.Transport(sock)
            try:
                transport.start_client(timeout=timeout)
                key = transport.get_remote_server_key()
            finally:
                transport.close()
    except (OSError, paramiko.SSHException) as exc:
        raise SSHError(f"Cannot reach {host}:{port}: {exc}") from None
    return f"{key.get_name()} {key.get_base64()}"
