#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian/Ubuntu machine, then runs them.
# This is the README's test command, and .ci/run calls nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: a virtual X server and the tools the desktop tests drive it with, the xcb
# libraries Qt's platform plugin loads, and a tray host for the tray tests.
debs=(xvfb xfonts-base xdotool xclip x11-xserver-utils x11-utils xauth
      libxcb-icccm4 libxcb-keysyms1 libxcb-xinput0 libxcb-xinerama0 libxcb-cursor0 libxcb-image0
      libxcb-render-util0 libxcb-shape0 libxcb-randr0 libxkbcommon-x11-0 libegl1 libgl1 libfontconfig1
      libdbus-1-3 fonts-dejavu-core trayer xcompmgr desktop-file-utils
      xterm x11-xkb-utils openbox  # a real terminal, setxkbmap for other layouts, a window manager
      zenity  # a GTK text entry that prints what it received (tests/automation/test_typing_layouts.py)
      chromium chromium-driver  # holodesk eval miniwob
      # The headless GNOME Wayland stack (bench/rigs/gnome_stack.py) and the portal backend's
      # GStreamer reader (PyGObject from Debian: pip cannot build it without a compiler toolchain).
      dbus-daemon mutter xwayland pipewire pipewire-bin wireplumber xdg-desktop-portal xdg-desktop-portal-gnome
      python3-gi gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 gstreamer1.0-pipewire
      gstreamer1.0-plugins-base
      # mutter through its library, with a hand on its keyboard layouts (bench/rigs/mutter_keyboard.py);
      # it brings GTK 3's typelib for the GTK entry (tests/support/gtk_target.py)
      gir1.2-mutter-11 gir1.2-gtk-3.0)
missing=()
for deb in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$deb" 2>/dev/null | grep -q "install ok installed" || missing+=("$deb")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# A project-local virtual environment; the CPU build of torch first, so the holotron extra's torch
# requirement is already met and pip does not pull several GB of CUDA packages.
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[test]"
# The Wayland backend reads PipeWire through GStreamer's Python bindings (gi), which come from
# Debian's python3-gi. Expose that one package (not all of dist-packages) to the venv when its
# Python has the same version as Debian's, which the compiled module needs.
if ! .venv/bin/python -c "import gi" 2>/dev/null; then
  debian_gi=/usr/lib/python3/dist-packages/gi
  abi=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  if ls "$debian_gi"/_gi"$abi" >/dev/null 2>&1; then
    mkdir -p .venv/debian-gi && ln -sfn "$debian_gi" .venv/debian-gi/gi
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$PWD/.venv/debian-gi" > "$site/debian-gi.pth"
  fi
fi

# The vLLM tier's server lives in its own environment (.venv-vllm); a no-op once installed.
bash tests/vllm/install.sh

.venv/bin/ruff check .
.venv/bin/ruff format --check .  # one layout for everyone: `ruff format .` fixes what this reports
bash tests/typecheck.sh  # mypy: strict on automation/, default elsewhere
# Nothing in the tests may reach a model hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# One run: the in-process engine's tests run here too (the holotron extra's transformers); the
# reference tier starts vLLM from .venv-vllm as a server process only.
exec .venv/bin/python -m pytest "$@"
