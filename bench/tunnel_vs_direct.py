"""What the SSH tunnel costs: ggml-rpc-server reached through OpenSSH's forward vs. directly on the LAN.

One simulated laptop behind a 1 Gbit link runs two servers from the runtime
bundle: one bound to its LAN address (direct mode), one to its 127.0.0.1
reached through `ssh -N -L` (the default). Alternating rounds measure a large
tensor upload (SET_TENSOR, as a model load does), the round trip of a small
RPC call, and decode speed of the bundled model with every layer on the laptop.

    .venv/bin/python bench/tunnel_vs_direct.py [--rounds 3] [--upload-mb 256]
"""

import argparse
import ctypes
import socket
import statistics
import struct
import time

from lan import bench_lan, target

ALLOC_BUFFER, BUFFER_GET_BASE, SET_TENSOR, GET_ALIGNMENT, GET_DEVICE_MEMORY = 0, 3, 6, 1, 11


class RpcTensor(ctypes.Structure):  # ggml-rpc.cpp's rpc_tensor (its messages are packed)
    _pack_ = 1
    _fields_ = [("id", ctypes.c_uint64), ("type", ctypes.c_uint32), ("buffer", ctypes.c_uint64),
                ("ne", ctypes.c_uint32 * 4), ("nb", ctypes.c_uint32 * 4), ("op", ctypes.c_uint32),
                ("op_params", ctypes.c_int32 * 16), ("flags", ctypes.c_int32), ("src", ctypes.c_uint64 * 10),
                ("view_src", ctypes.c_uint64), ("view_offs", ctypes.c_uint64), ("data", ctypes.c_uint64),
                ("name", ctypes.c_char * 64), ("use_count", ctypes.c_int32)]


def call(sock: socket.socket, cmd: int, payload: bytes, reply: int | None) -> bytes:
    from nodes.servers.handshake import command

    return command(sock, cmd, payload, reply)


def connect(endpoint: str) -> socket.socket:
    host, port = endpoint.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    call(sock, 14, bytes(24), 28)  # HELLO
    return sock


def upload_mb_s(endpoint: str, total_mb: int, chunk_mb: int = 8) -> float:
    total = total_mb * 2**20
    with connect(endpoint) as sock:
        pointer, _ = struct.unpack("<QQ", call(sock, ALLOC_BUFFER, struct.pack("<IQ", 0, total), 16))
        (base,) = struct.unpack("<Q", call(sock, BUFFER_GET_BASE, struct.pack("<Q", pointer), 8))
        tensor = RpcTensor(id=1, type=0, buffer=pointer, data=base)
        tensor.ne[:] = [total // 4, 1, 1, 1]
        tensor.nb[:] = [4, total, total, total]
        header, block = bytes(tensor), bytes(chunk_mb * 2**20)
        started = time.perf_counter()
        for offset in range(0, total, len(block)):
            call(sock, SET_TENSOR, header + b"\0" + struct.pack("<Q", offset) + block, None)
        call(sock, GET_ALIGNMENT, struct.pack("<I", 0), 8)  # answers only after every upload was applied
        return total / (time.perf_counter() - started) / 1e6


def small_call_us(endpoint: str, count: int = 500) -> list[float]:
    with connect(endpoint) as sock:
        times = []
        for _ in range(count):
            started = time.perf_counter()
            call(sock, GET_DEVICE_MEMORY, struct.pack("<I", 0), 16)
            times.append((time.perf_counter() - started) * 1e6)
    return times


def decode_tok_s(endpoint: str) -> float:
    from models_app.llamacpp import oneshot

    prompt = "<|im_start|>user\nTell me about clusters of laptops.<|im_end|>\n<|im_start|>assistant\n"
    out = oneshot.complete([endpoint], prompt, max_tokens=64)
    return out["completion_tokens"] / out["seconds"]


def start_servers(node, install_dir: str) -> dict[str, str]:
    from nodes.probing import probe
    from nodes.remote import ssh
    from nodes.runtime import install
    from nodes.runtime.bundle import find_bundle
    from nodes.servers import rpcserver

    install.install_runtime(node, install_dir, find_bundle(), probe.probe(node, install_dir), lambda *a, **k: None)
    rpcserver.start(node, install_dir, 50201, bind=node.host)
    rpcserver.start(node, install_dir, 50202, bind="127.0.0.1")
    time.sleep(1)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        local = sock.getsockname()[1]
    forward = ssh.forward(node, 50202, local)
    return {"direct LAN": f"{node.host}:50201", "SSH tunnel (OpenSSH)": f"127.0.0.1:{local}"}, forward


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--upload-mb", type=int, default=256)
    args = parser.parse_args()
    with bench_lan(1, rate="1gbit") as lan:
        node = target(lan, lan.laptops[0])
        endpoints, forward = start_servers(node, "~/.clusterpanel")
        results = {label: {"upload": [], "rtt": [], "decode": []} for label in endpoints}
        try:
            for _ in range(args.rounds):
                for label, endpoint in endpoints.items():
                    results[label]["upload"].append(upload_mb_s(endpoint, args.upload_mb))
                    results[label]["rtt"].extend(small_call_us(endpoint))
                    results[label]["decode"].append(decode_tok_s(endpoint))
        finally:
            forward.close()
    direct = results["direct LAN"]
    print(f"One simulated laptop behind a 1 Gbit link, {args.rounds} alternating rounds: {args.upload_mb} MiB "
          "uploaded with SET_TENSOR, 500 GET_DEVICE_MEMORY calls, 64 decoded tokens of the bundled model\n")
    print("| path | upload MB/s (median) | ratio | small call µs (p50 / p99) | decode tok/s (median) | ratio |")
    print("|---|---|---|---|---|---|")
    for label, r in results.items():
        up, dec = statistics.median(r["upload"]), statistics.median(r["decode"])
        rtt = sorted(r["rtt"])
        print(f"| {label} | {up:.1f} | {up / statistics.median(direct['upload']):.2f} | "
              f"{rtt[len(rtt) // 2]:.0f} / {rtt[int(len(rtt) * 0.99)]:.0f} | {dec:.1f} | "
              f"{dec / statistics.median(direct['decode']):.2f} |")


if __name__ == "__main__":
    main()
