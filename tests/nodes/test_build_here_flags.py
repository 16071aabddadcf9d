"""What a Mac, a CUDA laptop or a laptop lacking tools builds, or is told, read from what their tools print
(tests/nodes/fixtures/toolchain/): the exact CMake flags, and the exact words for what is missing."""

from pathlib import Path

import pytest

from nodes.runtime import buildplan, toolchain

FIXTURES = Path(__file__).parent / "fixtures" / "toolchain"
CMAKE_MINIMUMS = {"ggml": "3.14", "cuda": "3.18", "vulkan": "3.19"}  # what this llama.cpp's CMakeLists ask
BASE = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON", "-DGGML_BACKEND_DL=OFF", "-DGGML_NATIVE=ON",
        "-DGGML_RPC=ON", "-DGGML_BLAS=OFF", "-DGGML_CCACHE=OFF", "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON"]


def laptop(name: str) -> toolchain.Toolchain:
    """The laptop's recorded outputs, read back through the script's own format."""
    folder, text = FIXTURES / name, ""
    for path in sorted(folder.glob("*.txt")):
        status = folder / f"{path.stem}.rc"
        rc = status.read_text().strip() if status.exists() else "0"
        text += f"@@begin {path.stem} {rc}\n{path.read_text().rstrip(chr(10))}\n@@end\n"
    return toolchain.assess(toolchain.parse(text), CMAKE_MINIMUMS)


def test_it_builds_metal_on_an_apple_silicon_mac():
    tools = laptop("macbook-air-m2")
    plan = buildplan.plan(tools, "0" * 64)
    assert (tools.ready, tools.system, tools.backends, tools.generator) == (True, "macOS 14.5", ["metal"],
                                                                          "Unix Makefiles")
    assert plan.cmake_args == [*BASE, "-DCMAKE_INSTALL_RPATH=@loader_path", "-DGGML_METAL=ON",
                               "-DGGML_METAL_EMBED_LIBRARY=ON"]
    assert (plan.target, plan.jobs) == ("ggml-rpc-server", 8)
    assert "Metal: Apple M2 (Metal 3)." in tools.notes


def test_it_leaves_metal_off_on_an_intel_mac():
    tools = laptop("macbook-pro-intel")
    plan = buildplan.plan(tools, "0" * 64)
    assert plan.cmake_args == [*BASE, "-DCMAKE_INSTALL_RPATH=@loader_path", "-DGGML_METAL=OFF"]
    assert (tools.generator, plan.jobs) == ("Ninja", 12)
    assert tools.notes == ["Metal: built on Apple silicon only; this Mac computes on its CPU."]


def test_it_builds_cuda_for_the_gpus_own_compute_capability():
    tools = laptop("ubuntu-rtx2060")
    plan = buildplan.plan(tools, "0" * 64)
    assert plan.cmake_args == [*BASE, "-DCMAKE_INSTALL_RPATH=$ORIGIN", "-DGGML_CUDA=ON",
                               "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc", "-DCMAKE_CUDA_ARCHITECTURES=75"]
    assert tools.notes == ["CUDA 12.4: NVIDIA GeForce RTX 2060, driver 550.90.07."]
    assert [(gpu.name, gpu.memory) for gpu in tools.gpus] == [("NVIDIA GeForce RTX 2060", "6144 MiB")]


def test_it_takes_cuda_over_vulkan_for_one_nvidia_card():
    """Both would list the one card, twice over, as two devices."""
    tools = laptop("fedora-gtx1060")
    plan = buildplan.plan(tools, "0" * 64)
    assert tools.backends == ["cuda"] and tools.system == "Fedora Linux 40 (Workstation Edition)"
    assert plan.cmake_args[-3:] == ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.4/bin/nvcc",
                                    "-DCMAKE_CUDA_ARCHITECTURES=61"]
    assert "-DGGML_VULKAN=ON" not in plan.cmake_args


def test_it_refuses_a_driver_too_old_for_the_cuda_toolkit_in_plain_words():
    tools = laptop("ubuntu-gtx1060-driver470")
    assert not tools.ready
    assert tools.refusal() == (
        "This laptop cannot build the runtime yet: its NVIDIA driver 470.256.02 is too old for its CUDA 12.4 "
        "toolkit, which needs driver 525.60.13 or newer: update the NVIDIA driver, or install a CUDA toolkit that "
        "driver supports (CUDA 11.x runs on it).")


def test_it_tells_a_mac_without_its_tools_how_to_get_them():
    assert laptop("macbook-m1-without-tools").refusal() == (
        "This laptop cannot build the runtime yet: it lacks the Xcode command line tools (the compilers and make) "
        "and cmake (3.14 or newer). On the Mac, install the Xcode command line tools with `xcode-select --install` "
        "and install cmake with Homebrew (brew.sh): `brew install cmake`, then build again.")


def test_it_tells_a_bare_fedora_laptop_what_to_install():
    assert laptop("fedora-bare").refusal() == (
        "This laptop cannot build the runtime yet: it lacks a C and C++ compiler (cc and c++, or gcc and g++) and "
        "cmake (3.14 or newer). On Fedora: `sudo dnf install gcc-c++ cmake`. Then build again.")


def test_it_asks_for_the_cmake_this_llama_cpp_needs():
    assert laptop("debian10-old-cmake").refusal() == (
        "This laptop cannot build the runtime yet: it lacks cmake 3.14 or newer (it has 3.13.4). Install a newer "
        "cmake with `pip install --user cmake` (or from cmake.org). Then build again.")


@pytest.mark.parametrize("missing, words", [
    (["cc", "cxx", "cmake", "make"], "On Debian or Ubuntu: `sudo apt install build-essential cmake`."),
    (["cmake"], "it lacks cmake (3.14 or newer). On Debian or Ubuntu: `sudo apt install cmake`."),
])
def test_it_names_the_debian_packages_for_what_is_missing(missing, words):
    recorded = {
        "uname": toolchain.Recorded(0, "Linux x86_64"), "cores": toolchain.Recorded(0, "2"),
        "os_release": toolchain.Recorded(0, 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian'),
        "cc": toolchain.Recorded(0, "/usr/bin/cc"), "cxx": toolchain.Recorded(0, "/usr/bin/c++"),
        "cmake": toolchain.Recorded(0, "cmake version 3.25.1"), "make": toolchain.Recorded(0, "GNU Make 4.3")}
    for name in missing:
        recorded[name] = toolchain.Recorded(127, "")
    assert words in toolchain.assess(recorded, CMAKE_MINIMUMS).refusal()


def test_a_newer_cuda_needs_a_newer_cmake():
    """ggml-cuda's CMakeLists.txt asks for 3.18; ggml alone for 3.14."""
    recorded = {"uname": toolchain.Recorded(0, "Linux x86_64"), "cores": toolchain.Recorded(0, "4"),
                "cc": toolchain.Recorded(0, "/usr/bin/cc"), "cxx": toolchain.Recorded(0, "/usr/bin/c++"),
                "cmake": toolchain.Recorded(0, "cmake version 3.16.3"), "make": toolchain.Recorded(0, "GNU Make 4.2.1"),
                "nvcc": toolchain.Recorded(0, "Cuda compilation tools, release 11.8, V11.8.89"),
                "nvidia_smi": toolchain.Recorded(0, "NVIDIA GeForce GTX 1660, 520.61.05, 6144 MiB, 7.5")}
    tools = toolchain.assess(recorded, CMAKE_MINIMUMS)
    assert tools.backends == ["cuda"]
    assert tools.refusal().startswith("This laptop cannot build the runtime yet: it lacks cmake 3.18 or newer "
                                      "(it has 3.16.3).")


def test_vulkan_is_built_only_where_a_gpu_device_is_or_vulkaninfo_says_so():
    """glslc, headers and loader on a laptop with no GPU (a server's, or this test bed's simulated laptops, whose
    files are this machine's): Mesa's software renderer alone would pass, and its shaders take many minutes."""
    def tools(devices_rc: int | None) -> toolchain.Toolchain:
        text = "@@begin uname 0\nLinux x86_64\n@@end\n@@begin cores 0\n4\n@@end\n"
        text += "".join(f"@@begin {name} 0\n{out}\n@@end\n" for name, out in (
            ("glslc", "shaderc v2023.2"), ("vulkan_headers", "/usr/include/vulkan/vulkan.h"),
            ("vulkan_loader", "/usr/lib/x86_64-linux-gnu/libvulkan.so")))
        if devices_rc is not None:
            text += f"@@begin gpu_devices {devices_rc}\n{'/dev/dri/renderD128' if devices_rc == 0 else ''}\n@@end\n"
        return toolchain.assess(toolchain.parse(text), CMAKE_MINIMUMS)

    none = tools(1)
    assert none.backends == []
    assert "Vulkan: no GPU device (/dev/dri) and no `vulkaninfo` to ask: built without Vulkan." in none.notes
    assert tools(0).backends == ["vulkan"], "an Intel or AMD GPU's render node"
    assert tools(None).backends == ["vulkan"], "a laptop whose recording predates the question"
