"""The coding agents people point at a model server, from npm and unchanged, each getting an answer through the
panel: Claude Code (`claude -p`, ANTHROPIC_BASE_URL at the panel, its API key a panel token) over the Messages
API, and Codex CLI (`codex exec`, a custom provider at the panel's Responses API). The bundled model on the head,
with the context its prompts need (Codex's tools alone are some 4,500 tokens). Each runs with its traffic to its
maker turned off (no update checks, telemetry or analytics), in a home of its own."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job, JobStatus
from tests.jobs.api.conftest import serving
from tests.jobs.conftest import head_deployment

pytestmark = pytest.mark.timeout(400)
AGENTS = Path(sys.prefix) / "agents" / "node_modules" / ".bin"  # scripts/setup.sh --test installs them there


@pytest.fixture
def served(transactional_db, monkeypatch):
    with serving(head_deployment(slots=1, ctx=8192), monkeypatch) as deployment:
        yield deployment


def agent(name: str) -> str:
    found = AGENTS / name
    assert found.exists(), f"{found} is missing: scripts/setup.sh --test installs the coding agents from npm"
    return str(found)


def run(command: list[str], home: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=home, capture_output=True, text=True, timeout=300,
                          env={"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", **env})


def asked(token_name: str, question: str) -> Job:
    (job,) = Job.objects.filter(api_token__name=token_name)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert any(question in str(message["content"]) for message in job.messages), job.messages
    return job


def test_claude_code_answers_through_the_messages_api(served, web_server, bob, tmp_path):
    model = served.model.name
    done = run([agent("claude"), "--bare", "-p", "Say hello.", "--model", model, "--tools", "",
                "--system-prompt", "Be brief.", "--max-turns", "1"], tmp_path,
               ANTHROPIC_BASE_URL=web_server, ANTHROPIC_API_KEY=ApiToken.issue(bob, "claude-code")[1],
               ANTHROPIC_DEFAULT_HAIKU_MODEL=model, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
               DISABLE_AUTOUPDATER="1")
    assert done.returncode == 0 and done.stdout.strip(), (done.stdout, done.stderr[-2000:])
    job = asked("claude-code", "Say hello.")
    assert done.stdout.strip() == job.output.strip(), "Claude Code printed the panel's answer"


def test_codex_exec_answers_through_the_responses_api(served, web_server, bob, tmp_path):
    home = tmp_path / "codex"
    home.mkdir()
    (home / "instructions.md").write_text("You are a coding agent. Be brief.")
    (home / "config.toml").write_text(f"""model = "{served.model.name}"
model_provider = "panel"
model_instructions_file = "{home / 'instructions.md'}"
check_for_update_on_startup = false
[features]
multi_agent = false
goals = false
[analytics]
enabled = false
[model_providers.panel]
name = "clusterpanel"
base_url = "{web_server}/v1"
env_key = "PANEL_API_KEY"
wire_api = "responses"
""")
    done = run([agent("codex"), "exec", "--skip-git-repo-check", "Say hello."], tmp_path,
               CODEX_HOME=str(home), PANEL_API_KEY=ApiToken.issue(bob, "codex")[1])
    assert done.returncode == 0 and done.stdout.strip(), (done.stdout, done.stderr[-2000:])
    job = asked("codex", "Say hello.")
    assert job.params["tools"] and "exec_command" in job.params["tools"], "Codex's own function tools were offered"
    first = done.stdout.strip().splitlines()[0][:20]
    assert first in job.output, (done.stdout, job.output)
