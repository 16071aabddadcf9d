"""The runtime bundle, copied into a simulated laptop, serves RPC to the head."""

import json

import pytest

from models_app.llamacpp import libllama, oneshot
from nodes.remote import ssh
from nodes.servers import handshake as rpc
from tests.conftest import wait_for_port
from tests.nodes.laptops import target

PORT = 50052
START = ('cd .clusterpanel/clusterpanel-runtime && '
         '(setsid bin/ggml-rpc-server -H "$1" -p "$2" > rpc-server.log 2>&1 < /dev/null & echo $!)')


@pytest.fixture
def rpc_server(lan, runtime_bundle):
    """ggml-rpc-server from the bundle, running on laptop 1 (direct LAN mode)."""
    the_lan = lan(3)
    laptop = the_lan.laptops[0]
    node = target(the_lan, laptop)
    pid = ""
    try:
        ssh.push(node, runtime_bundle.tarball, "runtime.tar.gz")
        unpack = ssh.sh(node, "mkdir -p .clusterpanel && tar xzf runtime.tar.gz -C .clusterpanel")
        assert unpack.exit_status == 0, unpack.stderr
        pid = ssh.sh(node, START, laptop.address, str(PORT)).stdout.strip()
        wait_for_port(PORT, host=laptop.address)
        yield laptop, node
    finally:
        # By name as well as by pid: a server this fixture started and outlived its pid's kill stayed on
        # test-1:50052 for the rest of the run, and the compose test's own server there could not bind.
        ssh.sh(node, 'kill "$1" 2>/dev/null; pkill -u "$(id -un)" -x ggml-rpc-server; '
                     'rm -rf .clusterpanel runtime.tar.gz', pid)


def test_it_unpacks_the_bundle_on_the_laptop_intact(rpc_server):
    _, node = rpc_server
    listing = ssh.sh(node, "cd .clusterpanel/clusterpanel-runtime && cat manifest.json")
    files = json.loads(listing.stdout)["files"]
    sums = ssh.sh(node, 'cd .clusterpanel/clusterpanel-runtime && sha256sum "$@"', *files).stdout
    on_laptop = {name: digest for digest, name in (line.split() for line in sums.splitlines())}
    assert on_laptop == files


def test_it_completes_the_rpc_handshake_from_the_head(rpc_server, runtime_bundle):
    laptop, _ = rpc_server
    answer = rpc.hello(laptop.address, PORT)
    assert answer.version == runtime_bundle.rpc_protocol
    assert answer.compatible_with(runtime_bundle.rpc_protocol)
    assert answer.devices >= 1
    assert 0 < answer.free_memory <= answer.total_memory


def test_it_is_understood_by_the_heads_own_rpc_client(rpc_server):
    laptop, _ = rpc_server
    memory = libllama.rpc_device_memory(f"{laptop.address}:{PORT}")
    assert 0 < memory["free"] <= memory["total"]


def test_it_picks_the_best_cpu_variant_the_laptop_supports(rpc_server):
    laptop, node = rpc_server
    rpc.hello(laptop.address, PORT)
    log = ssh.run(node, ["cat", ".clusterpanel/clusterpanel-runtime/rpc-server.log"]).stdout
    flags = open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0].split()
    loaded = [line for line in log.splitlines() if "loaded CPU backend" in line]
    assert loaded, log
    if "avx2" in flags:
        assert not any(v in loaded[0] for v in ("-x64.so", "-sse42.so", "-sandybridge.so")), loaded[0]


def test_it_says_plainly_when_no_server_listens(lan):
    laptop = lan(3).laptops[2]
    with pytest.raises(rpc.RpcError, match="cannot talk to ggml-rpc-server"):
        rpc.hello(laptop.address, PORT + 1, timeout=2)


def test_it_runs_every_layer_on_the_laptop_and_answers_as_the_head_alone_would(rpc_server):
    laptop, _ = rpc_server
    prompt = "<|im_start|>user\nName a planet.<|im_end|>\n<|im_start|>assistant\n"
    alone = oneshot.complete([], prompt, max_tokens=8)
    remote = oneshot.complete([f"{laptop.address}:{PORT}"], prompt, max_tokens=8)
    assert set(remote["placement"].values()) == {"RPC0"}, remote["placement"]
    assert len(remote["placement"]) == 31, "30 blocks and the output layer"
    assert remote["text"] == alone["text"]
