"""A small client for ggml-rpc-server's handshake: is it there, and does it speak our protocol?

Talking to the server in Python (not through libggml-rpc) matters: the C client
aborts the whole process when a server is unreachable.
"""

import socket
import struct
from dataclasses import dataclass

RPC_CMD_GET_DEVICE_MEMORY = 11
RPC_CMD_HELLO = 14
RPC_CMD_DEVICE_COUNT = 15
CONN_CAPS_SIZE = 24
HELLO_RESPONSE_SIZE = 4 + CONN_CAPS_SIZE


class RpcError(Exception):
    pass


@dataclass(frozen=True)
class Hello:
    major: int
    minor: int
    patch: int
    devices: int
    free_memory: int = 0
    total_memory: int = 0

    @property
    def version(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    def compatible_with(self, client_version: str) -> bool:
        """The rule ggml's client applies: same major, server minor not newer."""
        major, minor, _ = (int(x) for x in client_version.split("."))
        return self.major == major and self.minor <= minor


def recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise RpcError("the server closed the connection during the handshake")
        data += chunk
    return data


def command(sock: socket.socket, cmd: int, payload: bytes, expect: int | None) -> bytes:
    """Send one RPC command; read its reply of `expect` bytes (None: the command has no reply)."""
    sock.sendall(struct.pack("<BQ", cmd, len(payload)) + payload)
    if expect is None:
        return b""
    (size,) = struct.unpack("<Q", recv_exact(sock, 8))
    if size != expect:
        raise RpcError(f"unexpected reply size {size} to command {cmd}; is this a ggml-rpc-server?")
    return recv_exact(sock, size)


def hello(host: str, port: int, timeout: float = 5.0) -> Hello:
    """Complete the RPC handshake, count the server's devices and ask device 0's memory, then hang up."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            reply = command(sock, RPC_CMD_HELLO, bytes(CONN_CAPS_SIZE), HELLO_RESPONSE_SIZE)
            (devices,) = struct.unpack("<I", command(sock, RPC_CMD_DEVICE_COUNT, b"", 4))
            memory = command(sock, RPC_CMD_GET_DEVICE_MEMORY, struct.pack("<I", 0), 16)
    except OSError as exc:
        raise RpcError(f"cannot talk to ggml-rpc-server at {host}:{port}: {exc}") from None
    free, total = struct.unpack("<QQ", memory)
    return Hello(reply[0], reply[1], reply[2], devices, free, total)
