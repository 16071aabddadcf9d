"""A laptop's devices as its runtime lists them: read from the server's own words, shown, kept out of plans by
choice, and a GPU left idle explained in words."""

import pytest

from nodes.models import Node, Probe
from nodes.pages.forms import EditNodeForm
from nodes.probing.devices import Device, gpu_unused, parse

LISTED = ("device\tCPU\tcpu\t25276485632\t25276485632\tAMD EPYC\n"
          "device\tVulkan0\tgpu\t6442450944\t6039797760\tNVIDIA GeForce RTX 2060\n"
          "device\tVulkan1\tigpu\t8589934592\t8589934592\tIntel(R) UHD Graphics 620 (KBL GT2)\n"
          "rpc-protocol\t7.0.0\n")


def test_the_listing_is_read_gpus_first_with_what_each_one_is():
    found, protocol = parse(LISTED)
    assert protocol == "7.0.0"
    assert [d.name for d in found] == ["Vulkan0", "Vulkan1", "CPU"], "the order a server serves them in"
    rtx, uhd, cpu = found
    assert (rtx.kind, rtx.type, rtx.total, rtx.free, rtx.host_memory) == ("vulkan", "gpu", 6 << 30, 5760 << 20, False)
    assert uhd.host_memory, "an integrated GPU's memory is the laptop's RAM"
    assert cpu.is_cpu and cpu.host_memory
    assert Device("Vulkan0", "gpu", 1, 1, "llvmpipe (LLVM 15.0.6, 256 bits)").host_memory, "a software renderer"
    assert Device("MTL0", "gpu", 1, 1, "Apple M2").kind == "metal"
    assert Device("MTL0", "gpu", 1, 1, "Apple M2").host_memory, "Apple silicon: the GPU's memory is the RAM"
    assert parse("Usage: ggml-rpc-server [options]\n") == ([], ""), "an older server lists nothing"


CPU_ONLY = [{"name": "CPU", "type": "cpu", "total": 1, "free": 1, "description": "x"}]


@pytest.mark.parametrize(("facts", "bundle_has_vulkan", "says"), [
    ({"gpu_vendors": ["0x10de"], "vulkan_loader": False, "devices": CPU_ONLY}, True,
     "This laptop has NVIDIA graphics, but no Vulkan loader (libvulkan.so.1)"),
    ({"gpu_vendors": ["0x1002"], "vulkan_loader": True, "devices": CPU_ONLY}, False,
     "This laptop has AMD graphics, but the panel's runtime has no Vulkan backend: on the panel's machine run "
     "`make vulkan`"),
    ({"gpu_vendors": ["0x8086"], "vulkan_loader": True, "devices": CPU_ONLY}, True,
     "This laptop has Intel graphics, but its Vulkan driver offers no GPU the runtime can use"),
    ({"gpu_vendors": [], "nvidia_gpus": ["NVIDIA GeForce GTX 1060, 470.256.02, 6144 MiB"], "vulkan_loader": True},
     True, "This laptop has NVIDIA graphics; install the runtime and probe again"),
])
def test_a_gpu_left_idle_is_explained(facts, bundle_has_vulkan, says):
    assert gpu_unused(facts, bundle_has_vulkan).startswith(says)


def test_a_software_renderer_does_not_hide_an_idle_gpu():
    soft = CPU_ONLY + [{"name": "Vulkan0", "type": "gpu", "total": 1, "free": 1, "description": "llvmpipe (LLVM 15)"}]
    said = gpu_unused({"gpu_vendors": ["0x10de"], "vulkan_loader": True, "devices": soft}, True)
    assert said.startswith("This laptop has NVIDIA graphics, but its Vulkan driver offers no GPU"), said
    assert gpu_unused({"gpu_vendors": ["0x1af4"], "devices": CPU_ONLY}, True) == "", "a VM's virtio display: no GPU"


def test_no_word_when_the_gpu_is_used_or_there_is_none():
    used = CPU_ONLY + [{"name": "Vulkan0", "type": "gpu", "total": 1, "free": 1, "description": "RTX 2060"}]
    assert gpu_unused({"gpu_vendors": ["0x10de"], "devices": used}, True) == ""
    assert gpu_unused({"gpu_vendors": [], "devices": CPU_ONLY}, True) == ""


@pytest.fixture
def laptop(db):
    node = Node.objects.create(name="gpu-1", host="10.0.0.9", username="lab", host_key="ssh-ed25519 AAAA")
    found, _ = parse(LISTED)
    Probe.objects.create(node=node, facts={"devices": [d.as_fact() for d in found]})
    return node


def form_data(node, **changes):
    form = EditNodeForm(instance=node)
    data = {field: form.initial.get(field) for field in form.fields}
    return {key: "" if value is None else value for key, value in {**data, **changes}.items()}


def test_an_admin_keeps_a_gpu_out_of_plans(laptop):
    form = EditNodeForm(form_data(laptop, devices_off=["Vulkan1"]), instance=laptop)
    assert form.is_valid(), form.errors
    form.save()
    laptop.refresh_from_db()
    assert laptop.devices_off == ["Vulkan1"]


@pytest.mark.parametrize(("off", "says"), [
    (["Vulkan7"], "Vulkan7 is not one of this laptop's devices (Vulkan0, Vulkan1, CPU); probe it to list them again."),
    (["Vulkan0", "Vulkan1", "CPU"], "Keep at least one device in plans, or the laptop holds no layers at all"),
])
def test_keeping_out_what_is_not_there_or_everything_is_refused_in_words(laptop, off, says):
    form = EditNodeForm(form_data(laptop, devices_off=off), instance=laptop)
    assert not form.is_valid()
    assert says in " ".join(form.errors["devices_off"])
    laptop.refresh_from_db()
    assert laptop.devices_off == []
