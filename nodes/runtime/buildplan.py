"""How a laptop builds its own ggml-rpc-server: CMake's flags and target from what it has, and the key its build is
cached under (the source and the flags: the same pair is never built twice).

Like the head's build (scripts/build_llama.py LLAMA_CPP_CMAKE_ARGS): Release, shared libraries found beside the
binary, RPC on, no curl or OpenSSL. Unlike it: the laptop's own CPU (GGML_NATIVE) rather than one backend per
instruction-set level, and so no GGML_BACKEND_DL, which ggml refuses with GGML_NATIVE ("the feature check relies
on ARCH_DEFINITIONS"); every backend chosen is then linked into libggml, and the one target pulls them all in.
"""

import hashlib
import json
from dataclasses import dataclass

from nodes.runtime.toolchain import Toolchain

TARGET = "ggml-rpc-server"
BASE_ARGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DGGML_BACKEND_DL=OFF",
    "-DGGML_NATIVE=ON",
    "-DGGML_RPC=ON",
    "-DGGML_BLAS=OFF",  # on by default on macOS (Accelerate); the head's build has none either
    "-DGGML_CCACHE=OFF",  # nothing written outside the build folder
    "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
]
# Where the server finds its libraries: beside itself, wherever the built folder ends up.
RPATH = {"Darwin": "@loader_path", "Linux": "$ORIGIN"}


@dataclass(frozen=True)
class BuildPlan:
    cmake_args: list[str]
    generator: str
    target: str
    jobs: int
    key: str  # 12 hex digits: runtime/built-<key> on the laptop

    @property
    def dir_name(self) -> str:
        return f"built-{self.key}"

    @property
    def runtime_id(self) -> str:
        """What Node.runtime records (12 characters): a build, not a bundle's sha256."""
        return f"built-{self.key[:6]}"

    def summary(self) -> str:
        gpu = [arg for arg in self.cmake_args if arg.startswith(("-DGGML_METAL=ON", "-DGGML_CUDA=ON", "-DGGML_VULKAN"))]
        backends = ", ".join(arg.removeprefix("-DGGML_").removesuffix("=ON").title() for arg in gpu)
        return f"CPU (native){', ' + backends if backends else ''}, RPC; {self.jobs} parallel jobs"


def backend_args(tools: Toolchain) -> list[str]:
    args = []
    if tools.os == "Darwin":
        args.append("-DGGML_METAL=ON" if "metal" in tools.backends else "-DGGML_METAL=OFF")
        if "metal" in tools.backends:
            args.append("-DGGML_METAL_EMBED_LIBRARY=ON")  # the shaders inside the library: no Xcode's metal tool
    if "cuda" in tools.backends:
        args += ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_COMPILER={tools.nvcc}"] if tools.nvcc else ["-DGGML_CUDA=ON"]
        capabilities = [gpu.compute_capability for gpu in tools.gpus]
        if capabilities and all(capabilities):  # else ggml's own choice: "native" with CMake 3.24+
            arches = sorted({cap.replace(".", "") for cap in capabilities}, key=int)
            args.append(f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(arches)}")
    if "vulkan" in tools.backends:
        args.append("-DGGML_VULKAN=ON")
    return args


def plan(tools: Toolchain, source_sha256: str) -> BuildPlan:
    args = [*BASE_ARGS, f"-DCMAKE_INSTALL_RPATH={RPATH.get(tools.os, '$ORIGIN')}", *backend_args(tools)]
    key = hashlib.sha256(json.dumps([source_sha256, args, TARGET]).encode()).hexdigest()[:12]
    return BuildPlan(args, tools.generator, TARGET, max(tools.cores, 1), key)
