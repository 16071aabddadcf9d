"""A laptop builds its own ggml-rpc-server from the head's own source: once (a few minutes on one core), then
never again for the same source and flags; the build lists its devices, speaks the head's protocol, becomes the
laptop's runtime and serves the head. One full build for the whole file, in any order: the build and its laptop
are kept for the whole run (session-scoped), as pytest-django runs a file's database tests before the others, and
in a run of several files one by one (TEST_WORKERS=0) the two halves of this file are apart, where a module's
fixtures would be made, and the runtime built, twice."""

import pytest
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from models_app.llamacpp import libllama
from nodes.models import ActionKind, ActionStatus, NodeAction
from nodes.probing import probe
from nodes.remote import ssh
from nodes.runtime import build_here, install, rpcsource
from nodes.servers import rpcserver, supervisor
from tests.nodes.laptops import register, run_now, target

FOLDER = "~/.cp-build"  # this file's own install folder: other files' runtimes stay out of its way
PORT = 50091


@pytest.fixture(scope="session")
def laptop(lan):
    the_lan = lan(3)
    laptop = the_lan.laptops[1]
    reach = target(the_lan, laptop)
    ssh.sh(reach, 'rm -rf -- "$1"', ".cp-build")
    yield the_lan, laptop, reach
    rpcserver.stop(reach, FOLDER, PORT)
    ssh.sh(reach, 'rm -rf -- "$1"', ".cp-build")


@pytest.fixture(scope="session")
def built(laptop):
    """The one cold build, with everything it reported."""
    reports = []
    done = build_here.build_runtime(laptop[2], FOLDER, build_here.head_protocol(),
                                    lambda message="", **progress: reports.append((message, progress)))
    return done, reports


@pytest.fixture
def node(laptop, db):
    the_lan, one, _ = laptop
    made = register(the_lan, one, name="builder")
    made.install_dir = FOLDER
    made.save(update_fields=["install_dir"])
    return made


def current(reach) -> str:
    return ssh.sh(reach, 'readlink -- "$1"', ".cp-build/runtime/current").stdout.strip()


def test_it_builds_the_runtime_on_the_laptop_checks_it_and_makes_it_current(built, laptop, runtime_bundle):
    done, reports = built
    assert done.rebuilt and done.sent == rpcsource.tarball().path.stat().st_size
    assert done.protocol == runtime_bundle.rpc_protocol
    assert [device.name for device in done.devices] == ["CPU"]
    assert current(laptop[2]) == done.plan.dir_name
    counted = [progress for _, progress in reports if progress.get("steps_total")]
    assert counted and counted[-1]["steps_done"] == counted[-1]["steps_total"]
    assert any(message.startswith("Building on the laptop: step ") for message, _ in reports)
    assert [progress["step"] for _, progress in reports if "step" in progress][1:4] == ["unpack", "configure", "build"]


def test_it_builds_the_server_alone_for_the_laptops_own_cpu(built, laptop):
    done, _ = built
    assert {"-DGGML_NATIVE=ON", "-DGGML_RPC=ON", "-DBUILD_SHARED_LIBS=ON"} <= set(done.plan.cmake_args)
    listing = ssh.sh(laptop[2], 'cd -- "$1/bin" && ls', ssh.remote_path(done.path)).stdout.split()
    assert "ggml-rpc-server" in listing and "libggml-cpu.so" in listing and "libggml-rpc.so" in listing
    assert not [name for name in listing if "llama" in name or "cuda" in name or "vulkan" in name], listing
    leftovers = ssh.sh(laptop[2], "ls -a .cp-build/runtime").stdout.split()
    assert not [name for name in leftovers if name.startswith(".build-")], leftovers


def test_a_second_run_rebuilds_nothing_and_says_so(built, node):
    action = run_now(node, ActionKind.BUILD_RUNTIME)
    assert action.status == ActionStatus.SUCCEEDED, action.error
    assert action.progress["rebuilt"] is False and action.progress["sent"] == 0
    assert action.progress["seconds"] < 30
    assert action.message.startswith("Nothing rebuilt")
    node.refresh_from_db()
    assert node.runtime == built[0].plan.runtime_id


def test_the_built_server_starts_and_answers_the_head(built, laptop, runtime_bundle):
    _, one, reach = laptop
    rpcserver.start(reach, FOLDER, PORT, bind=one.address)
    try:
        hello = supervisor.handshake(f"{one.address}:{PORT}", within=30)
        assert hello.version == runtime_bundle.rpc_protocol and hello.devices == 1
        memory = libllama.rpc_device_memory(f"{one.address}:{PORT}")  # ggml's own client, as the engine uses it
        assert 0 < memory["free"] <= memory["total"]
    finally:
        rpcserver.stop(reach, FOLDER, PORT)


def test_installing_keeps_the_laptops_own_build_unless_an_admin_asks_for_the_bundle(built, laptop, runtime_bundle):
    reach, said = laptop[2], []

    def tell(message: str = "", **progress) -> None:
        said.append(message)

    facts = probe.probe(reach, FOLDER)
    kept = install.install_runtime(reach, FOLDER, runtime_bundle, facts, tell)  # as a deployment does
    assert kept.runtime_id == built[0].plan.runtime_id and current(reach) == built[0].plan.dir_name
    assert "built itself" in said[-1]
    install.install_runtime(reach, FOLDER, runtime_bundle, facts, tell, replace_built=True)
    assert current(reach) == runtime_bundle.sha256[:12]
    again = build_here.build_runtime(reach, FOLDER, runtime_bundle.rpc_protocol, lambda *a, **k: None)
    assert not again.rebuilt and current(reach) == built[0].plan.dir_name


def test_the_laptop_page_says_what_a_build_does_before_it_starts(built, node, alice):
    admin = Client()
    admin.force_login(alice)
    page = admin.get(f"/nodes/{node.name}/").content.decode()
    assert "Build the runtime here…" in page
    asked = admin.post(f"/nodes/{node.name}/actions/build_runtime/").content.decode()
    assert "Build the runtime on builder?" in asked and "every core" in asked
    assert not NodeAction.objects.filter(node=node).exists()
    assert admin.post(f"/nodes/{node.name}/actions/build_runtime/", {"confirmed": "1"}).status_code == 302
    assert NodeAction.objects.get(node=node).kind == ActionKind.BUILD_RUNTIME


def test_its_log_is_shown_on_the_laptop_page(built, node, alice):
    action = run_now(node, ActionKind.BUILD_RUNTIME)
    admin = Client()
    admin.force_login(alice)
    assert f"/nodes/builder/actions/{action.pk}/log/" in admin.get("/nodes/builder/").content.decode()
    log = admin.get(f"/nodes/builder/actions/{action.pk}/log/").content.decode()
    assert "Linking CXX executable bin/ggml-rpc-server" in log and "rpc-protocol" in log


def test_a_script_starts_it_through_the_api(node, alice):
    api = Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'tests')[1]}")
    started = api.post("/api/nodes/builder/actions/", {"kind": "build_runtime"}, content_type="application/json")
    assert started.status_code == 202 and started.json()["kind"] == "build_runtime"
    schema = Client().get("/api/schema/").json()
    assert "build_runtime" in str(schema["components"]["schemas"]["ActionIn"])
