"""What a laptop has for building ggml-rpc-server itself: compilers, cmake, make or ninja, and a GPU's toolkit.

One script asks each tool on the laptop and records what it printed (`record`); everything else here is pure
reading of those recorded outputs, so a Mac or a CUDA laptop is checked in tests from outputs taken on real ones
(tests/nodes/fixtures/toolchain/). Missing tools are said in words, with the command that installs them on the
laptop's own system.
"""

import re
from dataclasses import dataclass, field

from nodes.remote import ssh

# Tools outside a plain SSH session's PATH count too (Homebrew, the CUDA toolkit, `pip install --user cmake`):
# the build looks in the same places.
EXTRA_PATH = "/opt/homebrew/bin:/usr/local/bin:/usr/local/cuda/bin:$HOME/.local/bin"
SCRIPT = r"""
PATH="$PATH:__EXTRA__"; export PATH
record() {
  name="$1"; shift; out=$("$@" 2>&1); rc=$?
  printf '@@begin %s %s\n%s\n@@end\n' "$name" "$rc" "$out"; return "$rc"
}
which_of() { for tool in "$@"; do command -v "$tool" && return 0; done; return 127; }
present() { found=1; for f in "$@"; do [ -e "$f" ] && echo "$f" && found=0; done; return $found; }
# A GPU driver in a bad state can hang its tools: give them 20 s where `timeout` exists (not on macOS).
limited() { if command -v timeout >/dev/null 2>&1; then timeout 20 "$@"; else "$@"; fi; }
record uname uname -sm
record cores sh -c 'nproc 2>/dev/null || sysctl -n hw.logicalcpu'
record cc which_of cc gcc clang
record cxx which_of c++ g++ clang++
record cmake cmake --version
record ninja ninja --version
record make make --version
record nvcc nvcc --version
record nvcc_path which_of nvcc
[ -d /usr/lib/wsl/lib ] && PATH="$PATH:/usr/lib/wsl/lib"  # WSL2: the Windows driver's nvidia-smi
if command -v nvidia-smi >/dev/null; then
  record nvidia_smi limited nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader ||
  record nvidia_smi limited nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
record glslc glslc --version
record vulkan_headers present ${VULKAN_SDK:+"$VULKAN_SDK/include/vulkan/vulkan.h"} /usr/include/vulkan/vulkan.h \
  /usr/local/include/vulkan/vulkan.h /opt/homebrew/include/vulkan/vulkan.h
record vulkan_loader present ${VULKAN_SDK:+"$VULKAN_SDK/lib/libvulkan.so"} /usr/lib/*/libvulkan.so \
  /usr/lib64/libvulkan.so /usr/lib/libvulkan.so /usr/local/lib/libvulkan.dylib /opt/homebrew/lib/libvulkan.dylib
command -v vulkaninfo >/dev/null && record vulkaninfo limited vulkaninfo --summary
if [ "$(uname -s)" = Darwin ]; then
  record cpu_brand sysctl -n machdep.cpu.brand_string
  record sw_vers sw_vers
  record xcode_select xcode-select -p
  record displays system_profiler SPDisplaysDataType
else
  record os_release cat /etc/os-release
  record gpu_devices present /dev/dri/renderD* /dev/dxg  # a GPU driver's device (DRM, or WSL2's)
fi
true
""".replace("__EXTRA__", EXTRA_PATH)
# The oldest driver each CUDA major version runs on (Linux; NVIDIA's CUDA compatibility table, "minor version
# compatibility"): CUDA 12.x needs 525.60.13 whatever x is.
CUDA_MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
NOT_FOUND = 127


@dataclass(frozen=True)
class Recorded:
    rc: int
    out: str

    @property
    def ok(self) -> bool:
        return self.rc == 0 and bool(self.out.strip())


@dataclass(frozen=True)
class Gpu:
    name: str
    driver: str
    memory: str
    compute_capability: str  # "7.5"; "" where the driver cannot say


@dataclass
class Toolchain:
    os: str
    arch: str
    cores: int
    system: str  # "macOS 14.5", "Debian GNU/Linux 12 (bookworm)"
    distro: str  # debian, fedora, macos, other: whose install commands to give
    generator: str = ""  # Ninja or Unix Makefiles
    cmake: str = ""
    backends: list[str] = field(default_factory=list)  # the GPU backends to build: metal, cuda, vulkan
    gpus: list[Gpu] = field(default_factory=list)
    cuda: str = ""  # the toolkit's release, "12.4"
    nvcc: str = ""
    notes: list[str] = field(default_factory=list)  # what is left out and why, said but not in the way
    missing: list[str] = field(default_factory=list)  # what stops a build, each with its fix

    @property
    def ready(self) -> bool:
        return not self.missing

    def refusal(self) -> str:
        return "This laptop cannot build the runtime yet: " + " ".join(self.missing)


def record(target: ssh.SSHTarget) -> dict[str, Recorded]:
    """Each tool's answer on the laptop (a tool it lacks answers with status 127)."""
    return parse(ssh.sh(target, SCRIPT, timeout=90).stdout)


def parse(output: str) -> dict[str, Recorded]:
    found = {}
    for match in re.finditer(r"^@@begin (\w+) (\d+)\n(.*?)\n?@@end$", output, re.S | re.M):
        found[match.group(1)] = Recorded(int(match.group(2)), match.group(3))
    return found


MISSING = Recorded(NOT_FOUND, "")


def answer(recorded: dict[str, Recorded], name: str) -> Recorded:
    return recorded.get(name) or MISSING


def version_in(text: str) -> str:
    match = re.search(r"(\d+\.\d+(?:\.\d+)*)", text)
    return match.group(1) if match else ""


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


def older(found: str, needed: str) -> bool:
    return version_key(found) < version_key(needed)


def assess(recorded: dict[str, Recorded], cmake_minimums: dict[str, str]) -> Toolchain:
    """What this laptop can build and what it lacks. `cmake_minimums`: the source's own (ggml, cuda, vulkan)."""
    os_name, _, arch = answer(recorded, "uname").out.strip().partition(" ")
    cores = answer(recorded, "cores").out.strip()
    tools = Toolchain(os_name, arch, int(cores) if cores.isdigit() else 1, *system_of(recorded))
    if os_name not in ("Linux", "Darwin"):
        tools.missing.append(f"it runs {os_name or 'an unknown system'}; only Linux and macOS laptops can build it.")
        return tools
    choose_gpu_backends(tools, recorded)
    needed = max([cmake_minimums.get("ggml", "3.14"), *(cmake_minimums.get(b, "0") for b in tools.backends)],
                 key=version_key)
    check_build_tools(tools, recorded, needed)
    return tools


def system_of(recorded: dict[str, Recorded]) -> tuple[str, str]:
    if "sw_vers" in recorded:
        version = re.search(r"ProductVersion:\s*(\S+)", recorded["sw_vers"].out)
        return f"macOS {version.group(1) if version else ''}".strip(), "macos"
    fields = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', answer(recorded, "os_release").out, re.M))
    family = f"{fields.get('ID', '')} {fields.get('ID_LIKE', '')}".split()
    distro = next((name for name in ("debian", "fedora") if name in family or
                   (name == "debian" and "ubuntu" in family) or (name == "fedora" and "rhel" in family)), "other")
    return fields.get("PRETTY_NAME", "Linux"), distro


def check_build_tools(tools: Toolchain, recorded: dict[str, Recorded], cmake_needed: str) -> None:
    lacks = []
    # On a Mac, cc and c++ are there even without the command line tools: stubs that offer to install them.
    no_xcode_tools = tools.distro == "macos" and not answer(recorded, "xcode_select").ok
    if no_xcode_tools or not (answer(recorded, "cc").ok and answer(recorded, "cxx").ok):
        lacks.append("compiler")
    cmake = answer(recorded, "cmake")
    tools.cmake = version_in(cmake.out) if cmake.ok else ""
    if not tools.cmake or older(tools.cmake, cmake_needed):
        lacks.append("cmake")
    for name, generator in (("ninja", "Ninja"), ("make", "Unix Makefiles")):
        if answer(recorded, name).ok:
            tools.generator = generator
            break
    else:
        lacks.append("make")
    if lacks:
        tools.missing.insert(0, lacking_in_words(tools, lacks, cmake_needed))


def lacking_in_words(tools: Toolchain, lacks: list[str], cmake_needed: str) -> str:
    what = {"compiler": "a C and C++ compiler (cc and c++, or gcc and g++)",
            "cmake": (f"cmake {cmake_needed} or newer (it has {tools.cmake})" if tools.cmake
                      else f"cmake ({cmake_needed} or newer)"),
            "make": "make or ninja"}
    if tools.distro == "macos":
        what["compiler"] = "the Xcode command line tools (the compilers and make)"
        lacks = [name for name in lacks if not (name == "make" and "compiler" in lacks)]
    said = f"it lacks {join_words([what[name] for name in lacks])}."
    return f"{said} {how_to_install(tools, lacks, cmake_needed)}"


def how_to_install(tools: Toolchain, lacks: list[str], cmake_needed: str) -> str:
    too_old = "cmake" in lacks and tools.cmake
    steps = []
    if tools.distro == "macos":
        if "compiler" in lacks or "make" in lacks:
            steps.append("install the Xcode command line tools with `xcode-select --install`")
        if "cmake" in lacks:
            steps.append("install cmake with Homebrew (brew.sh): `brew install cmake`" if not too_old
                         else "upgrade cmake: `brew upgrade cmake`")
        return "On the Mac, " + " and ".join(steps) + ", then build again."
    packages = {"debian": {"compiler": "build-essential", "cmake": "cmake", "make": "build-essential"},
                "fedora": {"compiler": "gcc-c++", "cmake": "cmake", "make": "make"}}.get(tools.distro)
    wanted = [name for name in lacks if not (name == "cmake" and too_old)]
    if packages and wanted:
        names = list(dict.fromkeys(packages[name] for name in wanted))
        command = "sudo apt install" if tools.distro == "debian" else "sudo dnf install"
        where = "On Debian or Ubuntu" if tools.distro == "debian" else "On Fedora"
        steps.append(f"{where}: `{command} {' '.join(names)}`")
    elif wanted:
        steps.append("Install them with the system's package manager (gcc, g++ or gcc-c++, cmake, make)")
    if too_old:
        steps.append(f"{'i' if steps else 'I'}nstall a newer cmake with `pip install --user cmake` (or from cmake.org)")
    return "; ".join(steps) + ". Then build again."


def join_words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def choose_gpu_backends(tools: Toolchain, recorded: dict[str, Recorded]) -> None:
    """One backend per GPU: two (CUDA and Vulkan on one NVIDIA card) would list the card twice."""
    if tools.os == "Darwin":
        choose_metal(tools, recorded)
    if not tools.backends:
        choose_cuda(tools, recorded)
    if not tools.backends:
        choose_vulkan(tools, recorded)


def choose_metal(tools: Toolchain, recorded: dict[str, Recorded]) -> None:
    if tools.arch != "arm64":
        tools.notes.append("Metal: built on Apple silicon only; this Mac computes on its CPU.")
        return
    displays = answer(recorded, "displays")
    support = re.search(r"Metal (?:Support|Family):\s*(.+)", displays.out)
    if displays.ok and not support:
        tools.notes.append("Metal: this Mac's graphics report no Metal support; it computes on its CPU.")
        return
    chip = answer(recorded, "cpu_brand").out.strip() or "Apple silicon"
    tools.backends.append("metal")
    tools.notes.append(f"Metal: {chip}" + (f" ({support.group(1).strip()})." if support else "."))


def gpus_of(recorded: dict[str, Recorded]) -> list[Gpu]:
    said = answer(recorded, "nvidia_smi")
    if said.rc != 0:
        return []
    found = []
    for line in said.out.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) >= 3 and version_in(parts[1]):
            found.append(Gpu(parts[0], parts[1], parts[2], parts[3] if len(parts) > 3 else ""))
    return found


def choose_cuda(tools: Toolchain, recorded: dict[str, Recorded]) -> None:
    release = re.search(r"release (\d+\.\d+)", answer(recorded, "nvcc").out)
    tools.gpus = gpus_of(recorded)
    names = ", ".join(gpu.name for gpu in tools.gpus)
    if not release and not tools.gpus:
        return
    if not release:
        tools.notes.append(f"CUDA: {names} but no CUDA toolkit (`nvcc --version` fails): built without CUDA. "
                           "Install the CUDA toolkit (developer.nvidia.com/cuda-downloads) for a CUDA build.")
        return
    if not tools.gpus:
        tools.notes.append(f"CUDA: nvcc {release.group(1)} is here but no NVIDIA driver answers (`nvidia-smi`): "
                           "built without CUDA.")
        return
    tools.cuda, tools.nvcc = release.group(1), answer(recorded, "nvcc_path").out.strip()
    needed = CUDA_MIN_DRIVER.get(int(tools.cuda.split(".")[0]))
    driver = min((gpu.driver for gpu in tools.gpus), key=version_key)
    if needed and older(driver, needed):
        tools.missing.append(
            f"its NVIDIA driver {driver} is too old for its CUDA {tools.cuda} toolkit, which needs driver {needed} "
            f"or newer: update the NVIDIA driver, or install a CUDA toolkit that driver supports"
            + (" (CUDA 11.x runs on it)" if not older(driver, CUDA_MIN_DRIVER[11]) else "") + ".")
        return
    tools.backends.append("cuda")
    tools.notes.append(f"CUDA {tools.cuda}: {names}, driver {driver}.")


def choose_vulkan(tools: Toolchain, recorded: dict[str, Recorded]) -> None:
    parts = {name: answer(recorded, name).ok for name in ("glslc", "vulkan_headers", "vulkan_loader")}
    if not any(parts.values()):
        return
    if not all(parts.values()):
        lacking = [words for name, words in (("glslc", "glslc"), ("vulkan_headers", "the Vulkan headers"),
                                             ("vulkan_loader", "the Vulkan loader library")) if not parts[name]]
        fix = {"debian": " (`sudo apt install glslc libvulkan-dev`)",
               "fedora": " (`sudo dnf install glslc vulkan-headers vulkan-loader-devel`)"}.get(tools.distro, "")
        tools.notes.append(f"Vulkan: no {join_words(lacking)}{fix}: built without Vulkan.")
        return
    info = recorded.get("vulkaninfo")
    devices = recorded.get("gpu_devices")
    if info is None and devices is not None and not devices.ok:
        # Mesa's software renderer alone would pass the checks above, and its shaders take many minutes to build.
        tools.notes.append("Vulkan: no GPU device (/dev/dri) and no `vulkaninfo` to ask: built without Vulkan.")
        return
    types = re.findall(r"deviceType\s*=\s*PHYSICAL_DEVICE_TYPE_(\w+)", info.out) if info else []
    if info is not None and not types:
        tools.notes.append("Vulkan: `vulkaninfo --summary` finds no Vulkan device: built without Vulkan.")
        return
    if types and all(kind == "CPU" for kind in types):
        names = ", ".join(re.findall(r"deviceName\s*=\s*(.+)", info.out)) or "none"
        tools.notes.append(f"Vulkan: its only Vulkan devices are software renderers ({names.strip()}), slower than "
                           "its CPU backend: built without Vulkan.")
        return
    tools.backends.append("vulkan")
    tools.notes.append("Vulkan: glslc, headers and loader present.")
