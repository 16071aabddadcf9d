# What a laptop can tell about itself, as key=value lines. POSIX sh; Linux here, macOS in nodes/probing/platforms.py.
# $1: the panel's install folder on the laptop (made if missing, to measure its disk).
set +e
dir="$1"
mkdir -p "$dir" 2>/dev/null
kv() { printf '%s=%s\n' "$1" "$2"; }

kv os "$(uname -s)"
kv kernel "$(uname -r)"
kv arch "$(uname -m)"
kv hostname "$(hostname)"
kv clock "$(date +%s.%N)"
kv disk_free_kb "$(df -Pk "$dir" 2>/dev/null | awk 'NR==2 {print $4}')"
kv disk_total_kb "$(df -Pk "$dir" 2>/dev/null | awk 'NR==2 {print $2}')"
[ -d "$dir/cache/rpc" ] && kv rpc_cache_kb "$(du -sk "$dir/cache/rpc" 2>/dev/null | awk '{print $1}')"

# A Mac answers through its own tools (nodes/probing/platforms.py), in the keys below.
if [ "$(uname -s)" = Darwin ]; then darwin_probe; exit 0; fi

[ -r /etc/os-release ] && kv distro "$(. /etc/os-release; echo "$PRETTY_NAME")"
kv glibc "$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
# The userland's word size: a 64-bit kernel may run a 32-bit system (Raspberry Pi OS 32-bit says aarch64).
kv userland_bits "$(getconf LONG_BIT 2>/dev/null)"
# The libstdc++ of the laptop's own architecture: the loader's cache says "(libc6,x86-64)" or "(libc6,AArch64)".
# Under qemu-user (an emulated laptop), programs find their libraries below QEMU_LD_PREFIX first.
case "$(uname -m)" in
  x86_64|amd64) ld_arch=x86-64 multiarch=x86_64-linux-gnu ;;
  aarch64|arm64) ld_arch=AArch64 multiarch=aarch64-linux-gnu ;;
  *) ld_arch="$(uname -m)" multiarch="$(uname -m)-linux-gnu" ;;
esac
libstdcxx=$( (ldconfig -p 2>/dev/null | awk -v a=",$ld_arch)" '/libstdc\+\+\.so\.6 / && index($0, a) {print $NF; exit}') )
[ -n "$QEMU_LD_PREFIX" ] && [ -r "$QEMU_LD_PREFIX/lib/libstdc++.so.6" ] && libstdcxx="$QEMU_LD_PREFIX/lib/libstdc++.so.6"
[ -z "$libstdcxx" ] && for f in "/usr/lib/$multiarch/libstdc++.so.6" /usr/lib64/libstdc++.so.6 /usr/lib/libstdc++.so.6; do
  [ -r "$f" ] && libstdcxx=$f && break
done
[ -n "$libstdcxx" ] && kv glibcxx "$(grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$libstdcxx" | sort -t. -k3 -n | tail -1)"

# ARM's /proc/cpuinfo has no "model name" (lscpu names the core) and says "Features" where x86 says "flags".
model=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
[ -z "$model" ] && model=$(lscpu 2>/dev/null | awk -F': *' '/^Model name/ {print $2; exit}')
[ -z "$model" ] && [ -r /proc/device-tree/model ] && model=$(tr -d '\0' < /proc/device-tree/model)
kv cpu_model "$model"
kv logical_cores "$(grep -c '^processor' /proc/cpuinfo)"
kv physical_cores "$(awk -F': ' '/^physical id/ {p=$2} /^core id/ {print p ":" $2}' /proc/cpuinfo | sort -u | wc -l)"
kv cpu_flags "$(awk -F': ' '/^(flags|Features)/ {print $2; exit}' /proc/cpuinfo)"
kv cpu_mhz "$(awk -F': ' '/^cpu MHz/ {s += $2; n++} END {if (n) printf "%.0f", s / n}' /proc/cpuinfo)"
awk '/^(MemTotal|MemAvailable|SwapTotal|SwapFree):/ {sub(":", "", $1); print "meminfo_" $1 "=" $2}' /proc/meminfo

# A memory limit set by a cgroup counts as the laptop's RAM (v2, then v1).
group=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
[ -r "/sys/fs/cgroup$group/memory.max" ] && kv cgroup_memory_limit "$(cat "/sys/fs/cgroup$group/memory.max")"
group=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
[ -n "$group" ] && [ -r "/sys/fs/cgroup/memory$group/memory.limit_in_bytes" ] && \
  kv cgroup_memory_limit "$(cat "/sys/fs/cgroup/memory$group/memory.limit_in_bytes")"

# Windows through WSL2: its kernel says so (uname -r, /proc/version); its RAM is the WSL2 virtual machine's.
kv proc_version "$(cat /proc/version 2>/dev/null)"
for entry in /proc/sys/fs/binfmt_misc/WSLInterop*; do [ -e "$entry" ] && kv wsl_interop 1 && break; done

source=$(df -P "$dir" 2>/dev/null | awk 'NR==2 {print $1}')
block=$(basename "$(readlink -f "$source" 2>/dev/null)")
for candidate in "/sys/class/block/$block/queue/rotational" "/sys/class/block/$block/../queue/rotational"; do
  [ -r "$candidate" ] && kv disk_rotational "$(cat "$candidate")" && break
done

# The link the panel reaches: the default route's, else the one holding the address this SSH login came in on.
nic=$(ip route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i + 1); exit}}')
[ -z "$nic" ] && nic=$(ip -o addr show 2>/dev/null | awk -v a="$(echo "$SSH_CONNECTION" | cut -d' ' -f3)" \
  'a != "" {split($4, p, "/"); if (p[1] == a) {print $2; exit}}')
if [ -n "$nic" ]; then
  kv nic "$nic"
  kv link_speed_mbps "$(cat "/sys/class/net/$nic/speed" 2>/dev/null)"
  # Wi-Fi: the driver's wireless or phy80211 entry, or its uevent; else the name (systemd's wl* names).
  wifi=0
  if [ -d "/sys/class/net/$nic/wireless" ] || [ -e "/sys/class/net/$nic/phy80211" ] || \
     grep -qx 'DEVTYPE=wlan' "/sys/class/net/$nic/uevent" 2>/dev/null; then wifi=1
  else case "$nic" in wl*) wifi=1 ;; esac
  fi
  kv wireless "$wifi"
fi

for supply in /sys/class/power_supply/*; do
  [ -r "$supply/type" ] || continue
  [ "$(cat "$supply/scope" 2>/dev/null)" = Device ] && continue  # a wireless mouse's or keyboard's own battery
  case "$(cat "$supply/type")" in
    Mains) kv on_ac "$(cat "$supply/online" 2>/dev/null)" ;;
    Battery) kv battery 1; kv battery_percent "$(head -n 1 "$supply/capacity" 2>/dev/null | cut -c 1-40)"
             kv battery_status "$(head -n 1 "$supply/status" 2>/dev/null | cut -c 1-40)" ;;
  esac
done
# The CPU's clock against its top, and a cgroup CPU limit with how often it held the laptop back (v2, then v1).
kv cpu_khz_now "$(cat /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq 2>/dev/null \
  | awk '{s += $1; n++} END {if (n) printf "%.0f", s / n}')"
kv cpu_khz_max "$(cat /sys/devices/system/cpu/cpu[0-9]*/cpufreq/cpuinfo_max_freq 2>/dev/null | sort -n | tail -1)"
group=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
if [ -r "/sys/fs/cgroup$group/cpu.max" ]; then
  kv cpu_quota "$(cat "/sys/fs/cgroup$group/cpu.max")"
  kv cpu_periods "$(awk '$1 == "nr_periods" {p = $2} $1 == "nr_throttled" {t = $2} END {print p, t}' \
    "/sys/fs/cgroup$group/cpu.stat")"
fi
group=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' /proc/self/cgroup)
for base in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct; do
  [ -n "$group" ] && [ -r "$base$group/cpu.cfs_quota_us" ] || continue
  kv cpu_quota "$(cat "$base$group/cpu.cfs_quota_us") $(cat "$base$group/cpu.cfs_period_us")"
  kv cpu_periods "$(awk '$1 == "nr_periods" {p = $2} $1 == "nr_throttled" {t = $2} END {print p, t}' \
    "$base$group/cpu.stat")"
  break
done
kv temperature_mc "$(cat /sys/class/thermal/thermal_zone*/temp 2>/dev/null | sort -n | tail -1)"

# GPUs, whatever the runtime can use: the PCI vendors of display devices, a Vulkan loader, NVIDIA's tool.
kv gpu_vendors "$(cat /sys/class/drm/card[0-9]*/device/vendor 2>/dev/null | sort -u | tr '\n' ' ')"
if { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep -q 'libvulkan\.so\.1'; then
  kv vulkan_loader 1
else
  kv vulkan_loader 0
fi
limited() { if command -v timeout >/dev/null 2>&1; then timeout 10 "$@"; else "$@"; fi; }  # a hung driver
# WSL2 keeps the Windows driver's nvidia-smi in /usr/lib/wsl/lib, on a login's PATH but not on an SSH command's.
[ -d /usr/lib/wsl/lib ] && PATH="$PATH:/usr/lib/wsl/lib"
command -v nvidia-smi >/dev/null 2>&1 && \
  kv nvidia_gpus "$(limited nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
    | tr '\n' ';')"
