#!/usr/bin/env bash
# The first start on a fresh machine, measured: `make run` in a new Debian 12 chroot (debootstrap minbase, then
# only git, make, python3 and ca-certificates), from a clone of this checkout's HEAD, as root so the demo runs,
# until the demo's model answers ("Demo ready"). Prints every setup step with the seconds since `make run`
# started, then stops the panel and removes the chroot.
#
#   sudo bench/first_start.sh            (CHROOT=/srv/clusterpanel-first-start PORT=8765 by default)
#
# This machine's pip configuration (pip.conf, PIP_* variables, local package folders it names) and CA bundle go
# into the chroot, so pip reaches PyPI the way it does here. Nothing else is cached: no pip cache, no build cache.
set -Eeuo pipefail

CHECKOUT=$(cd "$(dirname "$0")/.." && pwd)
R=${CHROOT:-/srv/clusterpanel-first-start}
PORT=${PORT:-8765}
LOG=${LOG:-/tmp/clusterpanel-first-start.log}
[[ $(id -u) == 0 ]] || { echo "run as root: it makes a chroot and the demo's network namespaces" >&2; exit 1; }

PANEL_GROUP=""
cleanup() {
  if [[ -n "$PANEL_GROUP" ]] && kill -0 -- "-$PANEL_GROUP" 2>/dev/null; then
    kill -INT -- "-$PANEL_GROUP" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 -- "-$PANEL_GROUP" 2>/dev/null || break; sleep 0.5; done
  fi
  for mount in $(findmnt -rn -o TARGET | grep "^$R" | sort -r); do umount "$mount" || true; done
  if findmnt -rn -o TARGET | grep -q "^$R"; then echo "left mounted under $R" >&2; else rm -rf "$R"; fi
}
trap cleanup EXIT

command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
[[ ! -e $R ]] || { echo "$R exists: remove it first" >&2; exit 1; }
mkdir -p "$R"
echo "debootstrap into $R ..."
debootstrap --variant=minbase bookworm "$R" http://deb.debian.org/debian >/dev/null
mount --bind "$R" "$R"  # its / a mount point, as `ip netns exec` wants (mount --make-rslave /)
for dir in proc sys dev dev/pts; do mount --bind "/$dir" "$R/$dir"; done
cp /etc/resolv.conf "$R/etc/"
[[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$R/etc/pip.conf"
for conf in .config/pip/pip.conf .pip/pip.conf; do
  [[ -f $HOME/$conf ]] && install -D -m 644 "$HOME/$conf" "$R/root/$conf"
done
# Local package folders pip is told about (find-links, file:// indexes), read-only at the same place.
for folder in $(cat /etc/pip.conf "$HOME"/.config/pip/pip.conf "$HOME"/.pip/pip.conf 2>/dev/null \
                | grep -oE '(file://)?/[^ ]+' | sed 's#^file://##; s#/simple/*$##' ; echo "${PIP_FIND_LINKS:-}"); do
  [[ -d $folder && ! -e $R$folder ]] || continue
  mkdir -p "$R$folder" && mount --bind -o ro "$folder" "$R$folder"
done
chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive bash -c \
  "apt-get update -qq && apt-get install -y -qq --no-install-recommends git make python3 ca-certificates >/dev/null"
cp /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/ca-certificates.crt"  # a proxy's own CA, if any
git clone -q "$CHECKOUT" "$R/root/clusterpanel"
echo "make run at $(git -C "$R/root/clusterpanel" log -1 --format='%h %s' | cut -c1-80)"

mapfile -t pip_env < <(env | grep '^PIP_' || true)
start=$(date +%s.%N)
chroot "$R" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
  "${pip_env[@]}" PANEL_PORT="$PORT" DEMO_LAN_NAME=fsdemo DEMO_LAN_SUBNET=10.226.0.0/24 \
  setsid bash -c 'cd /root/clusterpanel && exec make run' > >(
    while IFS= read -r line; do printf '%7.1f %s\n' "$(echo "$(date +%s.%N) - $start" | bc)" "$line"; done > "$LOG"
  ) 2>&1 &
sleep 2
PANEL_GROUP=$(pgrep -f '^make run$' -n || true)
for _ in $(seq 1800); do
  if grep -qE "Demo ready|The demo could not start|make: \*\*\*" "$LOG"; then break; fi
  sleep 1
done
echo
grep -E '==> |\[build\] .*done in|Demo ready|demo could not start|make: \*\*\*' "$LOG" | cut -c1-160
echo "(every line: $LOG)"
