"""The house's layers, lowest first: clusterpanel's toolkit (kit/) -> accounts -> nodes -> models_app -> jobs ->
the shell (the rest of clusterpanel: settings, urls, the API mount, sockets, dashboard, demo, run/, web/). A module
imports only its own layer and those below; an upper layer that a lower one must hear from answers a hook
(clusterpanel/kit/hooks.py). The simulated LAN (nodes/simlan/) is the test bed: of the product, only the demo and
`manage.py simlan` use it."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("clusterpanel", "nodes", "models_app", "jobs")
# The longest prefix decides: clusterpanel.kit.celery is the toolkit, clusterpanel.urls the shell.
LAYERS = {"clusterpanel.kit": 0, "clusterpanel.templatetags": 0, "clusterpanel.accounts": 1, "clusterpanel.models": 1,
          "clusterpanel.admin": 1, "nodes": 2, "models_app": 3, "jobs": 4, "clusterpanel": 5}
NAMES = {0: "the toolkit", 1: "accounts", 2: "nodes", 3: "models_app", 4: "jobs", 5: "the shell"}
TEST_BED = "nodes.simlan"
TEST_BED_USERS = ("nodes.simlan", "clusterpanel.demo", "nodes.management.commands.simlan")


def module_of(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def layer_of(module: str) -> int | None:
    if module == "clusterpanel":  # the package itself: it only loads the Celery app (kit)
        return 0
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return LAYERS[prefix]
    return None


def imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node.lineno


def sources(root: Path) -> list[Path]:
    return [path for app in APPS for path in sorted((root / app).rglob("*.py")) if "migrations" not in path.parts]


def upward_imports(root: Path = ROOT) -> list[str]:
    """Every import that runs up a layer or into the test bed, as 'file:line: what and why'."""
    found = []
    for path in sources(root):
        importer = module_of(path, root)
        mine = layer_of(importer)
        for imported, line in imports(path):
            theirs = layer_of(imported)
            where = f"{path.relative_to(root)}:{line}"
            if theirs is not None and theirs > mine:
                found.append(f"{where}: {importer} ({NAMES[mine]}) imports {imported} ({NAMES[theirs]}), a layer "
                             "above it: answer a hook instead (clusterpanel/kit/hooks.py)")
            elif imported.startswith(TEST_BED) and not importer.startswith(TEST_BED_USERS):
                found.append(f"{where}: {importer} imports the simulated LAN ({imported}), which is the test bed")
    return found


def test_every_import_runs_down_the_layers():
    assert upward_imports() == []


def test_every_module_has_a_layer():
    assert [module_of(path, ROOT) for path in sources(ROOT) if layer_of(module_of(path, ROOT)) is None] == []


def plant(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_checker_names_a_planted_upward_import_by_file_and_line(tmp_path):
    real = (ROOT / "nodes" / "models.py").read_text()
    plant(tmp_path, "nodes/models.py", real + "\n\ndef late():\n    from jobs.models import Job\n")
    plant(tmp_path, "clusterpanel/kit/units.py", "import models_app.models\n")
    plant(tmp_path, "clusterpanel/urls.py", "from jobs.models import Job\nfrom nodes.simlan.lan import Lan\n")
    plant(tmp_path, "models_app/deploying/deploy.py", "from nodes.simlan import lan\nfrom nodes.models import Node\n")
    found = upward_imports(tmp_path)
    last_line = len((real + "\n\ndef late():\n    from jobs.models import Job\n").splitlines())
    assert sorted(found) == [
        "clusterpanel/kit/units.py:1: clusterpanel.kit.units (the toolkit) imports models_app.models (models_app), "
        "a layer above it: answer a hook instead (clusterpanel/kit/hooks.py)",
        "clusterpanel/urls.py:2: clusterpanel.urls imports the simulated LAN (nodes.simlan.lan), which is the test "
        "bed",
        "models_app/deploying/deploy.py:1: models_app.deploying.deploy imports the simulated LAN (nodes.simlan), "
        "which is the test bed",
        f"nodes/models.py:{last_line}: nodes.models (nodes) imports jobs.models (jobs), a layer above it: answer a "
        "hook instead (clusterpanel/kit/hooks.py)",
    ], found
