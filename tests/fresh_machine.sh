#!/usr/bin/env bash
# Runs the README's test command as a brand-new machine would meet it, and says how it went.
#
#   sudo bash tests/fresh_machine.sh [pytest arguments]
#
# What a machine keeps from earlier runs is what hides a missing set-up step (a /tmp/.X11-unix that an
# earlier Xvfb made, a pip cache, a runtime folder, a leftover lock). So the command runs:
#   - on a fresh clone of the committed HEAD (uncommitted changes are not in it, as in CI), in a
#     folder of its own outside the repository;
#   - in a private mount namespace (unshare -m, root) where /tmp, /dev/shm and /run/user are empty;
#   - with a new HOME (no pip or Hugging Face cache, no settings) holding only the machine's pip
#     configuration (~/.config/pip: where this kind of machine finds its registries and its CPU torch
#     wheel, part of the machine's image, not something a run left), no XDG_RUNTIME_DIR, no display
#     and no D-Bus session inherited; CI=true, as CI sets it.
# What it cannot make fresh: the Debian packages already installed (the test command installs what
# is missing; the stop hook lists packages installed by hand that it does not name), the kernel and
# the CPU. Set HOLODESK_FRESH_KEEP=1 to keep the clone and its logs afterwards.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
  echo "tests/fresh_machine.sh needs root for its private mount namespace: sudo bash tests/fresh_machine.sh" >&2
  exit 2
fi
command -v unshare >/dev/null || { echo "tests/fresh_machine.sh needs unshare: apt-get install util-linux" >&2; exit 2; }

if [ "${HOLODESK_FRESH_INSIDE:-}" != 1 ]; then
  # On the disk, not in memory: the environments the test command builds take several GB.
  fresh=$(mktemp -d "${HOLODESK_FRESH_ROOT:-/var/tmp}/holodesk-fresh.XXXXXX")
  # A clone is readable by other users, as one in a home or /srv is (mktemp makes its folder 0700): as root,
  # the sway tier's programs run as nobody and read it.
  chmod 0755 "$fresh"
  [ "${HOLODESK_FRESH_KEEP:-}" = 1 ] || trap 'rm -rf "$fresh"' EXIT
  mkdir -p "$fresh/tmp" "$fresh/home/.config"
  [ -d "$HOME/.config/pip" ] && cp -r "$HOME/.config/pip" "$fresh/home/.config/pip"
  chmod 1777 "$fresh/tmp"
  git clone -q --no-local "$repo" "$fresh/clone"
  echo "fresh machine: clone of $(git -C "$fresh/clone" log --oneline -1) in $fresh/clone"
  started=$(date +%s)
  status=0
  HOLODESK_FRESH_INSIDE=1 FRESH="$fresh" unshare --mount --propagation private bash "$0" "$@" || status=$?
  elapsed=$(( $(date +%s) - started ))
  echo "fresh machine: the test command exited $status after $((elapsed / 60)) min $((elapsed % 60)) s"
  exit "$status"
fi

# Inside the namespace: empty folders in place of the machine's, then the test command.
mount --bind "$FRESH/tmp" /tmp
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
[ -d /run/user ] && mount -t tmpfs -o mode=755 tmpfs /run/user
for name in $(env | sed -n 's/^\(XDG_[A-Z_]*\|DISPLAY\|WAYLAND_DISPLAY\|XAUTHORITY\|DBUS_SESSION_BUS_ADDRESS\|SESSION_MANAGER\|HF_HOME\|VIRTUAL_ENV\)=.*/\1/p'); do
  unset "$name"
done
export HOME="$FRESH/home" CI=true
cd "$FRESH/clone"
exec bash tests/run.sh "$@"
