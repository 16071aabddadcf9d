"""The coding agents people point at a model server, from npm and unchanged, each getting an answer through the
panel: Claude Code (`claude -p`, ANTHROPIC_BASE_URL at the panel, its API key a panel token) over the Messages
API, and Codex CLI (`codex exec`, a custom provider at the panel's Responses API). The bundled model on the head,
with the context its prompts need. Codex runs with its shell tools off (a question, not a task), and the test
ends at the first of two things: Codex prints the answer, or Codex runs a tool the model called (request_user_input,
which it always offers) and sends the result back, which shows it read the panel's function-call stream. The
bundled 135M model calls that tool about one time in two and then again on every turn until Codex's context is
full (150 to 300 s, no answer); with the shell tools on it ran invented commands the same way.
Each runs with its traffic to its maker turned off (no update checks, telemetry or analytics), in a home of its own."""

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job, JobStatus
from tests.conftest import wait_until
from tests.jobs.api.conftest import serving
from tests.jobs.conftest import head_deployment

pytestmark = pytest.mark.timeout(400)
# Claude Code asks for 32,000 tokens by default; sampled at its temperature the 135M model now and then rambles
# to the end of its context, minutes on a loaded machine. Labs serving a small model cap it the same way.
ANSWER_TOKENS = 256
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
    (job,) = requests(token_name)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert any(question in str(message["content"]) for message in job.messages), job.messages
    return job


def test_claude_code_answers_through_the_messages_api(served, web_server, bob, tmp_path):
    model = served.model.name
    done = run([agent("claude"), "--bare", "-p", "Say hello.", "--model", model, "--tools", "",
                "--system-prompt", "Be brief.", "--max-turns", "1"], tmp_path,
               ANTHROPIC_BASE_URL=web_server, ANTHROPIC_API_KEY=ApiToken.issue(bob, "claude-code")[1],
               ANTHROPIC_DEFAULT_HAIKU_MODEL=model, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
               DISABLE_AUTOUPDATER="1", CLAUDE_CODE_MAX_OUTPUT_TOKENS=str(ANSWER_TOKENS))
    assert done.returncode == 0 and done.stdout.strip(), (done.stdout, done.stderr[-2000:])
    job = asked("claude-code", "Say hello.")
    assert job.params["max_tokens"] == ANSWER_TOKENS, job.params
    assert done.stdout.strip() == job.output.strip(), "Claude Code printed the panel's answer"


def test_codex_exec_answers_through_the_responses_api(served, web_server, bob, tmp_path):
    home = tmp_path / "codex"
    home.mkdir()
    (home / "instructions.md").write_text("You are a coding agent. Be brief. Answer a greeting in words, with no tool.")
    (home / "config.toml").write_text(f"""model = "{served.model.name}"
model_provider = "panel"
model_instructions_file = "{home / 'instructions.md'}"
check_for_update_on_startup = false
web_search = "disabled"
[features]
multi_agent = false
goals = false
shell_tool = false
unified_exec = false
[analytics]
enabled = false
[model_providers.panel]
name = "clusterpanel"
base_url = "{web_server}/v1"
env_key = "PANEL_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
""")
    codex = subprocess.Popen([agent("codex"), "exec", "--skip-git-repo-check", "Say hello."], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                             env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8",
                                  "CODEX_HOME": str(home), "PANEL_API_KEY": ApiToken.issue(bob, "codex")[1]})
    try:
        wait_until(lambda: codex.poll() is not None or len(requests("codex")) > 1, 300,
                   "Codex to answer or to send a tool's result back")
    finally:
        with contextlib.suppress(ProcessLookupError):  # none left when Codex had answered and exited
            os.killpg(codex.pid, signal.SIGKILL)  # the npm shim and the Codex binary it started
        out, err = codex.communicate(timeout=60)
    first, *after = requests("codex")
    assert first.status == JobStatus.SUCCEEDED, first.error
    assert any("Say hello." in str(message["content"]) for message in first.messages), first.messages
    offered = {tool["function"]["name"] for tool in json.loads(first.params["tools"])}
    assert "request_user_input" in offered, ("Codex's own function tools were offered", offered)
    if first.tool_calls:  # the model called one of them: Codex read the call and sent its result back
        assert after, (out, err[-2000:])
        call, sent = first.tool_calls[0], after[0].messages
        assert any((c["id"], c["function"]["name"]) == (call["id"], call["function"]["name"])
                   for m in sent for c in m.get("tool_calls") or []), (call, sent)
        assert any(m["role"] == "tool" and m["tool_call_id"] == call["id"] for m in sent), (call, sent)
    else:
        assert codex.returncode == 0 and out.strip(), (out, err[-2000:])
        assert out.strip().splitlines()[0][:20] in first.output, (out, first.output)


def requests(token_name: str) -> list[Job]:
    return list(Job.objects.filter(api_token__name=token_name).order_by("pk"))
