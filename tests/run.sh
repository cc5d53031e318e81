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
      # The headless GNOME Wayland stack (tests/support/gnome_stack.py) and the portal backend's
      # GStreamer reader (PyGObject from Debian: pip cannot build it without a compiler toolchain).
      dbus-daemon mutter xwayland pipewire pipewire-bin wireplumber xdg-desktop-portal xdg-desktop-portal-gnome
      python3-gi gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 gstreamer1.0-pipewire
      gstreamer1.0-plugins-base)
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

# A project-local virtual environment; the CPU build of torch first, so the test extra's torch
# requirement is already met and pip does not pull several GB of CUDA packages.
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# No torchvision: the torchvision 0.28.0 wheel the index offers is the CUDA build, which fails to import
# against this CPU torch ("operator torchvision::nms does not exist"); the stand-in checkpoint's image
# processor gets the PIL-based stand-in in tests/support/kernels/torchvision instead.
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

# The vLLM tier's server lives in its own environment (.venv-vllm), and so does the in-process
# engine's test run (below); a no-op once installed.
bash tests/vllm/install.sh

.venv/bin/ruff check .
.venv/bin/ruff format --check .  # one layout for everyone: `ruff format .` fixes what this reports
bash tests/typecheck.sh  # mypy: strict on automation/, default elsewhere
# Nothing in the tests may reach a model hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
status=0
.venv/bin/python -m pytest "$@" || status=$?
# The in-process engine (tests/inference/engine) needs transformers >= 5.3, which .venv's stand-in
# cannot have yet: .venv skips those tests (saying why) and they run here, in .venv-vllm, with the
# same arguments; nothing outside that folder is collected in this run (tests/conftest.py). With no
# arguments it must collect and pass them all (pytest's status 5 is "nothing collected"); with
# arguments that select none of them, collecting nothing is no failure.
echo "the in-process engine's tests, in .venv-vllm:"
engine=0
HOLODESK_ENGINE_RUN=1 .venv-vllm/bin/python -m pytest "$@" || engine=$?
if [ "$engine" -eq 5 ] && [ $# -gt 0 ]; then
  engine=0
fi
if [ "$engine" -ne 0 ]; then
  echo "the in-process engine's tests failed (pytest status $engine)" >&2
  [ "$status" -ne 0 ] || status=$engine
fi
exit "$status"
