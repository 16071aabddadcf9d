"""The devices a laptop's runtime can compute on (its CPU, a GPU through Vulkan, CUDA or Metal), as it lists them.

`ggml-rpc-server --list-devices` (scripts/llama_patches/0003-rpc-server-lists-devices.patch) prints one
tab-separated line per device. One rpc-server serves several devices (RPC protocol 3 and later); the head
sees each as an RPC device of its own, in the order the server was given them with `-d`.
"""

from dataclasses import asdict, dataclass

from nodes.remote import ssh
from nodes.runtime.bundle import RuntimeNotFound, find_bundle

# Vulkan drivers that compute on the CPU: their "video memory" is the laptop's RAM.
SOFTWARE_RENDERERS = ("llvmpipe", "lavapipe", "swiftshader")
LIST_TIMEOUT_S = 60.0  # a Vulkan driver may compile its pipelines cache on first use


class DevicesError(Exception):
    pass


class NotInstalled(DevicesError):
    pass


@dataclass(frozen=True)
class Device:
    name: str  # as ggml names it: CPU, Vulkan0, CUDA0, MTL0
    type: str  # cpu, gpu, igpu (shares the laptop's RAM), accel, other
    total: int
    free: int
    description: str

    @property
    def kind(self) -> str:
        """The backend: cpu, vulkan, cuda, metal, … (from the name ggml gives it)."""
        base = self.name.rstrip("0123456789").lower()
        return {"mtl": "metal", "rocm": "hip"}.get(base, base)

    @property
    def is_cpu(self) -> bool:
        return self.type == "cpu"

    @property
    def host_memory(self) -> bool:
        """Its memory is the laptop's RAM: the CPU, an integrated GPU, a software renderer."""
        return self.type in ("cpu", "igpu") or self.kind == "metal" or self.software  # Apple silicon: one memory

    @property
    def software(self) -> bool:
        """A Vulkan driver that computes on the CPU, not a GPU."""
        return any(word in self.description.lower() for word in SOFTWARE_RENDERERS)

    def as_fact(self) -> dict:
        return {**asdict(self), "kind": self.kind, "host_memory": self.host_memory}

    @classmethod
    def from_fact(cls, fact: dict) -> "Device":
        return cls(fact["name"], fact["type"], int(fact["total"]), int(fact["free"]), fact.get("description", ""))


CPU_ONLY = [Device("CPU", "cpu", 0, 0, "")]  # what a laptop probed before devices were listed is taken to have


def parse(output: str) -> tuple[list[Device], str]:
    """The devices and RPC protocol version in `--list-devices` output; GPUs first, in ggml's order, then the
    CPU: the order a server serves them in, so a GPU laptop's GPU holds the earlier of its layers."""
    devices, protocol = [], ""
    for line in output.splitlines():
        fields = line.split("\t")
        if fields[0] == "device" and len(fields) >= 6 and fields[3].isdigit() and fields[4].isdigit():
            devices.append(Device(fields[1], fields[2], int(fields[3]), int(fields[4]), "\t".join(fields[5:])))
        elif fields[0] == "rpc-protocol" and len(fields) == 2:
            protocol = fields[1]
    return sorted(devices, key=lambda device: device.is_cpu), protocol


LIST = """
bin="$1/bin/ggml-rpc-server"; [ -x "$bin" ] || exit 4
unset GGML_BACKEND_PATH
for gpu in "$1"/gpu/libggml-*.so; do [ -f "$gpu" ] && export GGML_BACKEND_PATH="$gpu"; done
exec "$bin" --list-devices
"""


def list_devices(target: ssh.SSHTarget, runtime: str) -> tuple[list[Device], str]:
    """Ask the runtime installed at `runtime` on the laptop (its bin/ggml-rpc-server, with the GPU backend in its
    gpu/ loaded) which devices it sees; (devices, its RPC protocol version)."""
    result = ssh.sh(target, LIST, ssh.remote_path(runtime), timeout=LIST_TIMEOUT_S)
    if result.exit_status == 4:
        raise NotInstalled("The runtime is not installed on this laptop yet; install it first.")
    found, protocol = parse(result.stdout)
    if not found:
        said = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [f"exit {result.exit_status}"]
        raise DevicesError(f"The runtime on this laptop did not list its devices ({said[0]}); it may be older than "
                           "the panel: install the runtime again.")
    return found, protocol


def current_runtime(install_dir: str) -> str:
    return f"{install_dir.rstrip('/')}/runtime/current"


GPU_MAKERS = {"0x10de": "NVIDIA", "0x1002": "AMD", "0x8086": "Intel", "0x106b": "Apple"}
VULKAN_DRIVERS = ("Debian/Ubuntu: sudo apt install libvulkan1 mesa-vulkan-drivers (AMD, Intel); NVIDIA's own driver "
                  "package brings its Vulkan driver (Ubuntu: sudo ubuntu-drivers install)")


def gpu_unused(facts: dict, bundle_has_vulkan: bool) -> str:
    """Why a GPU the laptop has holds no layers, in words ("" when none is idle for a reason the panel knows)."""
    listed = [Device.from_fact(fact) for fact in facts.get("devices", [])]
    if any(not device.is_cpu and not device.software for device in listed):
        return ""
    makers = sorted({GPU_MAKERS[vendor] for vendor in facts.get("gpu_vendors", []) if vendor in GPU_MAKERS})
    if facts.get("nvidia_gpus") and "NVIDIA" not in makers:
        makers.append("NVIDIA")
    if not makers:
        return ""
    gpu = f"This laptop has {' and '.join(makers)} graphics"
    if facts.get("vulkan_loader") is False:
        return (f"{gpu}, but no Vulkan loader (libvulkan.so.1), so the runtime can only use its CPU. Install it "
                f"with the GPU's Vulkan driver ({VULKAN_DRIVERS}), then probe the laptop again.")
    if not bundle_has_vulkan:
        return (f"{gpu}, but the panel's runtime has no Vulkan backend: on the panel's machine run `make vulkan`, "
                "then install the runtime on this laptop again.")
    if "devices" not in facts:
        return f"{gpu}; install the runtime and probe again to see whether it can use it."
    return (f"{gpu}, but its Vulkan driver offers no GPU the runtime can use (no Vulkan driver for it, or one "
            f"that only renders on the CPU). {VULKAN_DRIVERS}.")


def listed_devices(node) -> list[Device]:
    """A laptop's devices as its runtime last listed them; its CPU alone before that."""
    probe = node.probes.first()
    return [Device.from_fact(fact) for fact in (probe.facts if probe else {}).get("devices", [])] or list(CPU_ONLY)


def rows(node) -> list[dict]:
    """Each device for the laptop page and the API: what it is, its memory, its measured speed, whether plans
    may use it."""
    found = []
    for device in listed_devices(node):
        speed = node.speed_gb_s if device.is_cpu else node.device_speeds.get(device.name)
        found.append({**device.as_fact(), "speed_gb_s": speed, "in_plans": device.name not in node.devices_off})
    return found


def idle_gpu(node) -> str:
    """`gpu_unused` for the laptop's latest probe, against the runtime the panel installs."""
    probe = node.probes.first()
    if probe is None:
        return ""
    try:
        has_vulkan = "vulkan" in find_bundle(probe.facts.get("arch") or None).gpu_backends  # its architecture's
    except RuntimeNotFound:
        has_vulkan = False
    return gpu_unused(probe.facts, has_vulkan)
