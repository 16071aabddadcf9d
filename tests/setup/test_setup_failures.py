"""scripts/setup.sh never fails silently: whatever step fails, it says which one and why."""

import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A virtualenv Python that builds nothing and installs nothing: enough to walk setup.sh's steps.
FAKE_PYTHON = """#!/bin/sh
case "$1" in
  scripts/build_llama.py)
    # fails once the background install is under way (up to 5 s), as a real build fails minutes in
    i=0; while [ -n "$PIP_PID_FILE" ] && [ ! -s "$PIP_PID_FILE" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
    [ "$BUILD_FAILS" = 1 ] && { echo "Build failed at step: (simulated)" >&2; exit 1; }
    echo /nonexistent/llama_cpp_python-0.0.0-py3-none-any.whl ;;
  -m) [ "$2" = pip ] && [ "$PIP_FAILS" = 1 ] && { echo "pip: simulated failure" >&2; exit 3; }
      # the install from PyPI (pip install -q -r ...) stands for a long download when asked to
      [ "$2" = pip ] && [ -n "$PIP_PID_FILE" ] && [ "$5" = -r ] && { echo $$ > "$PIP_PID_FILE"; exec sleep 60; } ;;
esac
exit 0
"""


def checkout_copy(tmp_path: Path) -> Path:
    """setup.sh and its requirement files in a folder of their own, with an existing (fake) virtualenv."""
    copy = tmp_path / "checkout"
    (copy / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", copy / "scripts")
    for name in ("requirements.txt", "requirements-nodeps.txt", "requirements-test.txt",
                 "requirements-test-nodeps.txt"):
        shutil.copy(ROOT / name, copy)
    python = copy / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return copy


def setup(copy: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(["bash", "scripts/setup.sh", *args], cwd=copy, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def test_it_succeeds_without_the_test_packages_as_make_run_calls_it(tmp_path):
    done = setup(checkout_copy(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Setup complete" in done.stdout


def test_it_names_the_step_when_a_command_fails(tmp_path):
    failed = setup(checkout_copy(tmp_path), PIP_FAILS="1")
    assert failed.returncode != 0
    assert "setup failed: pip install failed" in failed.stderr


def test_a_failed_build_leaves_no_pip_running_behind_it(tmp_path):
    """The packages from PyPI install while llama.cpp builds; a build that fails ends that install too."""
    pid_file = tmp_path / "pip.pid"
    failed = setup(checkout_copy(tmp_path), BUILD_FAILS="1", PIP_PID_FILE=str(pid_file))
    assert failed.returncode != 0
    assert "Python packages from PyPI install meanwhile" in failed.stdout
    pid = int(pid_file.read_text())
    for _ in range(50):
        if not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the background pip install outlived setup")


def test_it_names_the_step_when_an_unguarded_command_fails(tmp_path):
    copy = checkout_copy(tmp_path)
    (copy / "requirements-test.txt").unlink()
    failed = setup(copy, "--test")
    assert failed.returncode != 0
    assert 'setup failed during "Building llama.cpp with RPC' in failed.stderr, failed.stderr
    assert "line" in failed.stderr and "exit" in failed.stderr


FAKE_APT = """#!/bin/sh
# Records what a package's service start would hear from policy-rc.d while packages are installed.
[ "$1" = install ] || exit 0
if [ -x "$POLICY_RC_D" ]; then "$POLICY_RC_D" nginx start; echo $? > "$APT_SAW"; else echo none > "$APT_SAW"; fi
if [ -n "$APT_INTERRUPTED" ]; then kill -TERM "$PPID"; sleep 1; exit 1; fi
"""


def without_cmake(tmp_path: Path) -> str:
    """A PATH with every command of this machine but cmake (so one package is missing), and an apt-get that
    installs nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(FAKE_APT)
    (bin_dir / "apt-get").chmod(0o755)
    for folder in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        for command in sorted(Path(folder).glob("*")) if Path(folder).is_dir() else []:
            if command.name != "cmake" and not (bin_dir / command.name).exists():
                (bin_dir / command.name).symlink_to(command)
    return str(bin_dir)


def test_it_starts_no_system_service_while_it_installs_packages(tmp_path):
    """The panel runs its own sshd, Redis, PostgreSQL and nginx: installing the packages must not start the
    system's (sshd on port 22; nginx on port 80 fails the whole install where that port is taken)."""
    policy, saw = tmp_path / "policy-rc.d", tmp_path / "saw"
    done = setup(checkout_copy(tmp_path), PATH=without_cmake(tmp_path), POLICY_RC_D=str(policy),
                 APT_SAW=str(saw), PYTHON=shutil.which("python3"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Installing system packages: cmake" in done.stdout
    assert saw.read_text().strip() == "101", "a service start during the install was refused"
    assert not policy.exists(), "the machine's policy is as it was"


def test_it_keeps_a_policy_the_machine_already_has(tmp_path):
    policy, saw = tmp_path / "policy-rc.d", tmp_path / "saw"
    policy.write_text("#!/bin/sh\nexit 0\n")
    policy.chmod(0o755)
    done = setup(checkout_copy(tmp_path), PATH=without_cmake(tmp_path), POLICY_RC_D=str(policy),
                 APT_SAW=str(saw), PYTHON=shutil.which("python3"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert saw.read_text().strip() == "0" and policy.read_text() == "#!/bin/sh\nexit 0\n"


def test_it_takes_its_policy_away_when_it_is_interrupted_during_the_install(tmp_path):
    """Left behind, the policy would quietly keep every later package's service from starting."""
    policy, saw = tmp_path / "policy-rc.d", tmp_path / "saw"
    done = setup(checkout_copy(tmp_path), PATH=without_cmake(tmp_path), POLICY_RC_D=str(policy),
                 APT_SAW=str(saw), PYTHON=shutil.which("python3"), APT_INTERRUPTED="1")
    assert done.returncode == 143, done.stdout + done.stderr
    assert saw.read_text().strip() == "101" and not policy.exists()
