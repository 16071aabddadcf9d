# Steps of bench/gpu_check.sh, sourced by it: the runtime bundle and the machine (its GPU, the Vulkan loader and
# ICDs). They use the script's globals and helpers (say, note, skip, step, left).
# ---- the runtime bundle -------------------------------------------------------------------------------------
find_bundle() {
  [[ -n $BUNDLE ]] && { echo "$BUNDLE"; return; }
  # This machine's architecture: `make test` also builds the ARM laptops' bundle, and builds it last.
  ls -t "$CACHE"/llama-cpp-python-*/runtime-*/clusterpanel-runtime-*-linux-"$(uname -m)".tar.gz 2>/dev/null | head -1
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
  # GPU backends beside the binary are loaded by every server; those in gpu/ only by one told of it, as the
  # panel starts a laptop's GPU servers (nodes/servers/rpcserver.py).
  local gpu
  for gpu in "$BIN"/../gpu/libggml-*.so; do [[ -f $gpu ]] && GPU_ENV=("GGML_BACKEND_PATH=$(realpath "$gpu")"); done
  note backends "$( (cd "$BIN" && ls libggml-*.so; cd ../gpu 2>/dev/null && ls libggml-*.so | sed 's|^|gpu/|') 2>/dev/null \
    | sed -E 's/libggml-(.*)\.so$/\1/' | grep -vE '^(base|rpc)$' | sed -E 's/^cpu-.*/cpu/' | sort -u | tr '\n' ' ')"
  say "bundle $BUNDLE unpacked"
}

# device<TAB>name<TAB>type<TAB>total<TAB>free<TAB>description lines, as patch 0003's --list-devices prints them;
# an older server prints its usage instead, and lists its devices only when refused an unknown one (in MiB).
list_devices() {
  local devices=$WORK/devices.tsv
  step 90 "$WORK/list.out" "$WORK/list.err" env "${RPC_ENV[@]}" "${GPU_ENV[@]}" "$BIN/ggml-rpc-server" --list-devices
  grep $'^device\t' "$WORK/list.out" >"$devices"
  if [[ -s $devices ]]; then
    note list_method "--list-devices"
  else
    step 90 "$WORK/list.out" "$WORK/list.err" env "${RPC_ENV[@]}" "${GPU_ENV[@]}" "$BIN/ggml-rpc-server" -d gpu-check-no-such-device
    cat "$WORK/list.out" "$WORK/list.err" \
      | sed -nE 's/^ +([^ :]+): (.*) \(([0-9]+) MiB, ([0-9]+) MiB free\)$/\1\t\3\t\4\t\2/p' \
      | awk -F'\t' '{t = ($1 == "CPU") ? "cpu" : "gpu"; printf "device\t%s\t%s\t%d\t%d\t%s\n", $1, t, $2*1048576, $3*1048576, $4}' \
      >"$devices"
    note list_method "-d (an older server: no --list-devices)"
  fi
  grep -E '^ggml_vulkan: [0-9]+ = ' "$WORK/list.out" "$WORK/list.err" -h | while IFS= read -r line; do
    note vulkan_says "${line#ggml_vulkan: }"
  done
  [[ -s $devices ]] || { skip devices "the bundle's rpc-server listed no device: $(tail -1 "$WORK/list.err")"; return 1; }
  say "devices: $(cut -f2 "$devices" | tr '\n' ' ')"
}

# The device the bundle reaches the NVIDIA GPU by: a Vulkan device named NVIDIA, never a software renderer.
gpu_device() {
  [[ -n $GPU_DEVICE ]] && { echo "$GPU_DEVICE"; return; }
  awk -F'\t' 'tolower($6) ~ /nvidia/ && $2 ~ /^Vulkan/ {print $2; exit}' "$WORK/devices.tsv"
}

# Why the bundle's rpc-server lists no NVIDIA Vulkan device, in the order a reader would check.
vulkan_missing() {
  if ! grep -q $'^backends\t.*vulkan' "$FACTS"; then
    echo "the bundle carries no Vulkan backend (no libggml-vulkan.so in bin/ or gpu/)"
  elif grep -q $'^vulkan_loader\tmissing' "$FACTS"; then
    echo "no Vulkan loader here (libvulkan.so.1): bring Debian's libvulkan1 .deb in --debs"
  elif grep -q $'^nvidia_icd\tnone' "$FACTS"; then
    echo "no NVIDIA Vulkan ICD here (nvidia_icd.json): the driver's Vulkan part is not installed or not mounted"
  else
    echo "the bundle's rpc-server lists no NVIDIA Vulkan device: $(grep -i -m1 vulkan "$WORK/list.err" || echo 'it says nothing of Vulkan')"
  fi
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
  LIB_DIRS=()
  vulkan_loader
  vulkan_icds
  if ((${#LIB_DIRS[@]})); then
    local joined
    joined=$(IFS=:; echo "${LIB_DIRS[*]}")
    RPC_ENV+=("LD_LIBRARY_PATH=$joined${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  fi
  [[ -n ${NVIDIA_DRIVER_CAPABILITIES:-} ]] && note nvidia_driver_capabilities "$NVIDIA_DRIVER_CAPABILITIES"
  return 0
}

# libvulkan.so.1 as installed, else from a libvulkan1 .deb brought along (unpacked here, never into /).
vulkan_loader() {
  local found deb
  found=$(ldconfig -p 2>/dev/null | grep -m1 'libvulkan.so.1 ' | sed 's/.*=> //')
  if [[ -z $found ]]; then
    deb=$(ls "$DEBS"/libvulkan1_*.deb 2>/dev/null | head -1)
    if [[ -n $deb ]] && step 30 /dev/null "$WORK/dpkg.err" dpkg -x "$deb" "$WORK/vulkan"; then
      found=$(ls "$WORK"/vulkan/usr/lib/*/libvulkan.so.1 2>/dev/null | head -1)
      [[ -n $found ]] && LIB_DIRS+=("$(dirname "$found")")
      found="${found:-none} (from $deb)"
    fi
  fi
  note vulkan_loader "${found:-missing}"
}

# The ICDs the loader reads, and NVIDIA's: where a container mounts the driver's own outside the usual folders,
# the loader is told of it.
vulkan_icds() {
  local icds nvicd lib
  icds=$(ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json 2>/dev/null | tr '\n' ' ')
  note vulkan_icds "${icds:-none}"
  nvicd=$(ls /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json 2>/dev/null | head -1)
  if [[ -z $nvicd ]]; then
    nvicd=$(ls /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd*.json 2>/dev/null | head -1)
    [[ -n $nvicd ]] && RPC_ENV+=("VK_DRIVER_FILES=$nvicd" "VK_ICD_FILENAMES=$nvicd")
  fi
  if [[ -z $nvicd ]]; then
    note nvidia_icd "none"
    return 0
  fi
  lib=$(sed -nE 's/.*"library_path": *"([^"]+)".*/\1/p' "$nvicd")
  local dir
  if ldconfig -p | grep -q " ${lib##*/} " || [[ -e $lib ]]; then
    note nvidia_icd "$nvicd -> $lib (found)"
    return 0
  fi
  for dir in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
    if [[ -e $dir/${lib##*/} ]]; then
      LIB_DIRS+=("$dir")
      note nvidia_icd "$nvicd -> $lib (in $dir)"
      return 0
    fi
  done
  note nvidia_icd "$nvicd -> $lib (NOT found)"
}
