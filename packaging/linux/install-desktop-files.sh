#!/usr/bin/env bash
# Installs Holodesk's desktop entries and icon for the current user (XDG paths), so the app shows in
# the menu, can start at login (--autostart), and `holodesk trigger` has an entry to bind a shortcut to.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
data="${XDG_DATA_HOME:-$HOME/.local/share}"
config="${XDG_CONFIG_HOME:-$HOME/.config}"

install -D -m 644 "$here/holodesk.desktop" "$data/applications/holodesk.desktop"
install -D -m 644 "$here/holodesk-new-task.desktop" "$data/applications/holodesk-new-task.desktop"
install -D -m 644 "$repo/assets/icons/holodesk.svg" "$data/icons/hicolor/scalable/apps/holodesk.svg"
if [ "${1:-}" = "--autostart" ]; then
  install -D -m 644 "$here/holodesk-autostart.desktop" "$config/autostart/holodesk.desktop"
fi
if ! command -v holodesk >/dev/null 2>&1; then
  echo "note: 'holodesk' is not on PATH; the entries call it by name (link .venv/bin/holodesk into ~/.local/bin)" >&2
fi
echo "installed Holodesk desktop entries under $data"
