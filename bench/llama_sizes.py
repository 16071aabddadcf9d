"""What llama.cpp itself would allocate for a GGUF file: its own loader and context, with `no_alloc`.

llama.cpp loads the header only and sizes every buffer without allocating one (the weights are never read, so
sparse files from bench/sparse_gguf.py do), then logs the KV cache, recurrent state and compute buffers: of one
CPU device, or of each rpc-server of a split. For a split it registers rpc-servers of the laptops' own runtime
bundle, started here on 127.0.0.1 (they allocate nothing either) and stopped by pid afterwards.
"""

import contextlib
import os
import re
import resource
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import free_port  # noqa: E402

GiB = 2**30
SAYS = {"KV cache": r"llama_kv_cache: size =\s+([\d.]+) MiB",
        "recurrent state": r"llama_memory_recurrent: size =\s+([\d.]+) MiB",
        "compute buffer": r"\bCPU compute buffer size =\s+([\d.]+) MiB"}
DEVICE = re.compile(r"RPC\d+\[127\.0\.0\.1:(\d+)\] compute buffer size =\s+([\d.]+) MiB")
ROOT = Path(__file__).resolve().parent.parent


def llama_log(path: str, ctx: int, split: str = "", ports: str = "") -> None:
    """In a child: load `path` with no_alloc, size a context of `ctx` tokens, print llama.cpp's log. With
    `split` (layers per device, comma-separated) the devices are the rpc-servers on `ports`. Repacking stays off
    (the AMX trap in docs/architecture.md)."""
    import ctypes

    import llama_cpp as lib

    from models_app.llamacpp.libllama import load_backends, register_rpc_servers

    lines = []
    keep = lib.llama_log_callback(lambda level, text, user: lines.append(text.decode(errors="replace")))
    lib.llama_log_set(keep, None)
    load_backends()
    params = lib.llama_model_default_params()
    params.load_mode, params.lazy_mode, params.no_alloc, params.use_extra_bufts = 0, 0, True, False
    params.n_gpu_layers = 0
    if split:
        counts = [float(c) for c in split.split(",")]
        register_rpc_servers([f"127.0.0.1:{port}" for port in ports.split(",")])
        params.n_gpu_layers = int(sum(counts))
        shares = (ctypes.c_float * lib.llama_max_devices())(*counts)
        params.tensor_split = shares
    model = lib.llama_model_load_from_file(path.encode(), params)
    if model:
        context = lib.llama_context_default_params()
        context.n_ctx, context.n_batch, context.n_ubatch, context.n_seq_max = ctx, 512, 512, 1
        lib.llama_init_from_model(model, context)
    sys.stdout.write("".join(lines))


def llama_says(path: Path, ctx: int, split: tuple[int, ...] = (), ports: list[int] | None = None) -> dict:
    """MiB llama.cpp would allocate, by SAYS' names, and "devices": each rpc-server's compute buffer in the
    order of `ports`. The child may map no more than 16 GiB."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (16 * GiB, 16 * GiB))
    arguments = [str(path), ctx, ",".join(map(str, split)), ",".join(map(str, ports or []))]
    code = f"import bench.llama_sizes as s; s.llama_log(*{arguments!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT,
                          preexec_fn=limit, check=False)
    found = {name: re.search(pattern, done.stdout) for name, pattern in SAYS.items()}
    if found["compute buffer"] is None:
        said = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise RuntimeError(f"llama.cpp did not size a context for {path.name}: {' / '.join(said)}")
    answer = {name: float(match.group(1)) if match else 0.0 for name, match in found.items()}
    by_port = {int(port): float(mib) for port, mib in DEVICE.findall(done.stdout)}
    answer["devices"] = [by_port.get(port, 0.0) for port in ports or []]
    return answer


def server_binary(folder: Path) -> Path:
    """The laptops' ggml-rpc-server, unpacked from the bundle the panel would push."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterpanel.settings")
    from nodes.runtime.bundle import find_bundle

    bundle = find_bundle()
    with tarfile.open(bundle.tarball) as archive:
        archive.extractall(folder, filter="data")
    return next(folder.glob(f"*/{bundle.manifest['binary']}"))


def wait_listening(port: int, process: subprocess.Popen, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the rpc-server on port {port} did not start")


@contextlib.contextmanager
def local_rpc_servers(count: int, folder: Path):
    """`count` rpc-servers on 127.0.0.1, one thread each; yields their ports; stops each by its pid."""
    binary = server_binary(folder)
    started: list[tuple[int, subprocess.Popen]] = []
    try:
        for _ in range(count):
            port = free_port()
            process = subprocess.Popen([str(binary), "-H", "127.0.0.1", "-p", str(port), "-t", "1"],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            started.append((port, process))
            wait_listening(port, process)
        yield [port for port, _ in started]
    finally:
        for _, process in started:
            process.terminate()
        for _, process in started:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
