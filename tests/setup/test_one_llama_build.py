"""One build of llama.cpp serves the head and the laptops (scripts/build_llama.py): the head's llama-cpp-python
carries the very ggml libraries of the laptops' runtime bundle, CPU variants included, and picks its CPU code at
run time as a laptop does."""

import hashlib
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from scripts.llama_source import extract_all

ROOT = Path(__file__).resolve().parents[2]


def installed_lib_dir() -> Path:
    import llama_cpp

    return Path(llama_cpp.__file__).parent / "lib"


def loaded_cpu_code(stderr: str) -> str:
    found = re.findall(r"loaded CPU backend from \S*/(libggml-cpu-[\w]+\.so)", stderr)
    assert found, stderr
    return found[0]


def test_the_head_has_every_ggml_library_of_the_bundle_byte_for_byte(runtime_bundle):
    # bin/ only: the GPU backends in gpu/ are the laptops' alone (the head computes on its CPU)
    libraries = {Path(name).name: digest for name, digest in runtime_bundle.manifest["files"].items()
                 if name.startswith("bin/") and Path(name).name.startswith("libggml")}
    assert len([n for n in libraries if n.startswith("libggml-cpu-")]) == len(runtime_bundle.manifest["cpu_variants"])
    here = installed_lib_dir()
    for name, digest in libraries.items():
        assert (here / name).is_file(), f"the head lacks the bundle's {name}"
        assert hashlib.sha256((here / name).read_bytes()).hexdigest() == digest, f"the head's {name} differs"


def test_the_head_picks_the_cpu_code_a_laptop_on_this_cpu_picks(runtime_bundle, tmp_path):
    head = subprocess.run([sys.executable, "-c", "from models_app.llamacpp import libllama; libllama.load_backends()"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert head.returncode == 0, head.stderr
    with tarfile.open(runtime_bundle.tarball) as archive:
        extract_all(archive, tmp_path)
    server = tmp_path / "clusterpanel-runtime" / "bin" / "ggml-rpc-server"
    laptop = subprocess.run([str(server), "--help"], capture_output=True, text=True, timeout=60)
    assert loaded_cpu_code(head.stderr) == loaded_cpu_code(laptop.stdout + laptop.stderr)
    flags = Path("/proc/cpuinfo").read_text()
    if re.search(r"\bavx2\b", flags):  # the baseline variants are for CPUs without it
        assert loaded_cpu_code(head.stderr) not in ("libggml-cpu-x64.so", "libggml-cpu-sse42.so")


def test_a_model_loaded_on_the_head_answers_with_the_loaded_cpu_code():
    prompt = json.dumps([{"role": "user", "content": "Name three rivers."}])
    done = subprocess.run([sys.executable, "-m", "models_app.llamacpp.oneshot", "--prompt=", "--max-tokens", "8",
                           "--ctx", "512", f"--chat={prompt}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["completion_tokens"] > 0
    assert loaded_cpu_code(done.stderr).startswith("libggml-cpu-")
