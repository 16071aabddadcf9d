"""The jobs app's layers: the Celery tasks on top call down; the doors (chat, api) use the engine, the queue and
the batches and usage rooms, but not each other; the engine uses the queue; nothing
below imports what is above it, and nothing at all imports jobs/tasks.py (senders name tasks through
jobs/task_messages.py)."""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# apps.py is where Django starts the app: nothing imports it, and its ready() answers the machines' hooks
# (nodes/probing/speed.py, nodes/laptops/holds.py) with the engine's work, so it sits on top.
# batches and usage each hold a service the doors call and their own pages; neither imports a door.
RANK = {"models": 0, "params": 0, "structured": 0, "tools": 0, "param_error": 0, "embedding_inputs": 0, "apps": 5,
        "migrations": 0, "queue": 1,
        "task_messages": 1, "usage": 2, "engine": 2, "prometheus": 2, "batches": 2, "chat": 3, "api": 3,
        "deployment_jobs": 4, "tasks": 4, "management": 4}


def part_of(dotted: str) -> str:
    """'jobs.engine.loop' -> 'engine'; 'jobs.models' -> 'models'."""
    return dotted.split(".")[1]


def imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [name for name in found if name.startswith("jobs.")]


def wrong_way(importer: str, imported: str) -> bool:
    if importer == imported:
        return False
    if RANK[importer] == RANK[imported] == 3:  # chat and api are separate doors
        return True
    return RANK[imported] > RANK[importer]


def violations(sources: list[Path]) -> list[str]:
    found = []
    for path in sources:
        relative = path.relative_to(ROOT)
        inside = relative.parts[0] == "jobs"
        importer = (relative.parts[1] if len(relative.parts) > 2 else relative.stem) if inside else None
        for name in {part_of(name): name for name in reversed(imports(path))}.values():  # one line per part
            if part_of(name) not in RANK:
                found.append(f"{relative}: imports {name}, which is in no layer")
            elif part_of(name) == "tasks" and importer != "tasks":
                found.append(f"{relative}: imports {name} (send a message through jobs/task_messages.py)")
            elif inside and wrong_way(importer, part_of(name)):
                found.append(f"{relative}: {importer} imports {name}")
    return found


def project_sources() -> list[Path]:
    folders = ("jobs", "clusterpanel", "nodes", "models_app")
    return [path for folder in folders for path in (ROOT / folder).rglob("*.py")]


def test_every_import_runs_down_the_layers():
    assert violations(project_sources()) == []


def test_every_jobs_module_belongs_to_a_layer():
    parts = {path.relative_to(ROOT / "jobs").parts[0].removesuffix(".py") for path in (ROOT / "jobs").iterdir()
             if path.name not in {"__init__.py", "__pycache__"}}
    assert parts <= set(RANK), f"not in a layer: {sorted(parts - set(RANK))}"


def test_it_notices_an_import_the_wrong_way(tmp_path, monkeypatch):
    """The check can fail: a queue module importing the engine, a page importing the API, anybody importing
    the tasks."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "jobs" / "queue").mkdir(parents=True)
    (tmp_path / "jobs" / "chat").mkdir()
    (tmp_path / "nodes").mkdir()
    queue = tmp_path / "jobs" / "queue" / "queueing.py"
    queue.write_text("from jobs.engine import loop\n")
    chat = tmp_path / "jobs" / "chat" / "views.py"
    chat.write_text("from jobs.api.inputs import json_body\nfrom jobs.queue import queueing\n")
    node = tmp_path / "nodes" / "views.py"
    node.write_text("def later():\n    from jobs.tasks import run_job\n")
    found = violations([queue, chat, node])
    assert len(found) == 3, found
    assert any("queue imports jobs.engine" in line for line in found)
    assert any("chat imports jobs.api" in line for line in found)
    assert any("jobs.tasks" in line and line.startswith("nodes") for line in found)
