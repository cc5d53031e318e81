#!/usr/bin/env bash
# Installs Holodesk's desktop entries and icon for the current user (XDG paths), so the app shows in
# the menu, can start at login (--autostart), and `holodesk trigger` has an entry to bind a shortcut to.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
data="${XDG_DATA_HOME:-$HOME/.local/share}"
config="${XDG_CONFIG_HOME:-$HOME/.config}"

# Entries name the command by absolute path: a login session's PATH rarely holds a venv's bin folder.
holodesk="$(command -v holodesk || true)"
[ -n "$holodesk" ] || [ ! -x "$repo/.venv/bin/holodesk" ] || holodesk="$repo/.venv/bin/holodesk"
if [ -z "$holodesk" ]; then
  echo "error: no 'holodesk' command found (on PATH or in $repo/.venv): install Holodesk first" >&2
  exit 1
fi
entry() {  # entry SOURCE TARGET: copy a desktop file with Exec pointing at this installation
  mkdir -p "$(dirname "$2")"
  sed -e "s|^Exec=holodesk|Exec=$holodesk|" -e "s|^TryExec=holodesk|TryExec=$holodesk|" "$1" > "$2"
  chmod 644 "$2"
}
entry "$here/holodesk.desktop" "$data/applications/holodesk.desktop"
entry "$here/holodesk-new-task.desktop" "$data/applications/holodesk-new-task.desktop"
install -D -m 644 "$repo/assets/icons/holodesk.svg" "$data/icons/hicolor/scalable/apps/holodesk.svg"
if [ "${1:-}" = "--autostart" ]; then
  entry "$here/holodesk-autostart.desktop" "$config/autostart/holodesk.desktop"
fi
echo "installed Holodesk desktop entries under $data"
