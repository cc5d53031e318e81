#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian/Ubuntu machine, then runs them.
# This is the README's test command, and .ci/run calls nothing else.
#
#   bash tests/run.sh [pytest arguments]           everything: set-up, lint and types, every test
#   bash tests/run.sh --quick [pytest arguments]   the development loop: only the fast tier's set-up
#                                                  (no vLLM environment, no desktop packages, no checkers),
#                                                  no lint or types, and only the tests that start no
#                                                  display and no vLLM and are no minutes-long benchmark
#                                                  (-m "not display and not vllm and not bench")
#
# Lint and types alone: bash tests/lint.sh. The slow tiers by marker: -m vllm, -m wayland (the headless
# GNOME stack), -m wlroots (the headless sway stack), -m kde (the headless KWin stack), -m chromium,
# -m display (every display, those four included), -m bench (benchmarks run to the end); see
# tests/conftest.py and the README.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
if [ "${1:-}" = "--quick" ]; then
  quick=true
  shift
fi

# Debian packages. The fast tier's: the xcb libraries and the rest Qt's platform plugins load, the
# clipboard tool, GStreamer's Python bindings (PyGObject from Debian: pip cannot build it without a
# compiler toolchain).
debs=(xclip libxcb-icccm4 libxcb-keysyms1 libxcb-xinput0 libxcb-xinerama0 libxcb-cursor0 libxcb-image0
      libxcb-render-util0 libxcb-shape0 libxcb-randr0 libxkbcommon-x11-0 libegl1 libgl1 libfontconfig1
      libdbus-1-3 fonts-dejavu-core desktop-file-utils dbus-daemon
      lintian appstream man-db  # the Debian package's checks (tests/packaging/test_deb.py)
      python3-gi gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 gstreamer1.0-plugins-base)
# The display tiers': a virtual X server and the tools the desktop tests drive it with, a tray host.
display_debs=(xvfb xfonts-base xdotool x11-xserver-utils x11-utils xauth trayer xcompmgr
      xterm x11-xkb-utils openbox  # a real terminal, setxkbmap for other layouts, a window manager
      zenity  # a GTK text entry that prints what it received (tests/automation/test_typing_layouts.py)
      kitty alacritty  # GL terminals on Mesa's llvmpipe (tests/automation/test_typing_terminals.py)
      rxvt-unicode  # urxvt, frozen and continued while text is typed (tests/automation/test_typing_freeze.py)
      chromium chromium-driver  # holodesk eval miniwob
      # The headless GNOME Wayland stack (bench/rigs/gnome_stack.py) and the portal backend's
      # PipeWire reader; wl-clipboard for the portal's wl-copy paste (tests/automation/wayland).
      mutter xwayland pipewire pipewire-bin wireplumber xdg-desktop-portal xdg-desktop-portal-gnome
      gstreamer1.0-pipewire wl-clipboard
      # mutter through its library, with a hand on its keyboard layouts (bench/rigs/mutter_keyboard.py);
      # it brings GTK 3's typelib for the GTK entry (tests/support/gtk_target.py)
      gir1.2-mutter-11 gir1.2-gtk-3.0
      # AT-SPI: the caret's place for the approval panel (app/gui/caret_atspi.py) and the accessibility
      # bus the caret tests start on their own D-Bus session (tests/app/gui/test_caret_place.py)
      gir1.2-atspi-2.0 at-spi2-core
      # The headless sway (wlroots) stack (bench/rigs/sway_stack.py; swaymsg comes with sway), its
      # screencopy capture (grim) and virtual-keyboard typing (wtype) (tests/automation/wlroots).
      sway grim wtype
      # foot, the terminal of the sway typing matrix: Wayland-native and drawn without GL, which the
      # pixman sway lacks (tests/automation/wlroots/test_sway_typing_matrix.py)
      foot
      # The headless KDE stack (bench/rigs/kwin_stack.py): KWin on its virtual backend and the KDE
      # portal, which is a Qt 5 program and aborts without Qt 5's Wayland platform (tests/automation/kde).
      # Measured on Debian 12: 141 packages (one an upgrade), 40 MB of archives, 184 MB on disk, 30 s.
      kwin-wayland xdg-desktop-portal-kde qtwayland5)
$quick || debs+=("${display_debs[@]}")
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

# The vLLM tier's server lives in its own environment (.venv-vllm; a no-op once installed). It is
# set up beside the project's environment and the checkers rather than before them: on a fresh clone
# here the set-up, lint and types then took 84 s to the first test, where one after another they took
# 143 s. Its words are shown when it is done.
if ! $quick; then
  vllm_log=$(mktemp)
  bash tests/vllm/install.sh > "$vllm_log" 2>&1 &
  vllm_install=$!
  # A failed step before the tests (a lint error) stops it too, not only this script.
  trap 'pkill -P "$vllm_install" 2>/dev/null; kill "$vllm_install" 2>/dev/null; true' EXIT
fi

# A project-local virtual environment; the CPU build of torch first, so the holotron extra's torch
# requirement is already met and pip does not pull several GB of CUDA packages. pip runs only when
# pyproject.toml or this script changed since the last set-up with these extras (a stamp in .venv).
extras=test,cluster  # cluster: Ray and Ray Data, for the --ray tests
$quick || extras=test,cluster,lint
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=.venv/.holodesk-setup-${extras/,/-}
wanted=$(cat pyproject.toml tests/run.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[$extras]"
  echo "$wanted" > "$stamp"
fi
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

# Nothing in the tests may reach a model hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# torch's OpenMP threads sleep instead of spinning between kernels, as holodesk's own processes do:
# with a vLLM server or a desktop busy beside it, spinning made the tiny model's decode many times
# slower (bench/cpu_wait_policy.py).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# Parallel workers (pytest-xdist): each test group on one worker (tests/support/parallel.py).
# HOLODESK_TEST_WORKERS=0 runs everything in this one process.
workers=(-n "${HOLODESK_TEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder)
if $quick; then
  exec .venv/bin/python -m pytest "${workers[@]}" -m "not display and not vllm and not bench" "$@"
fi

bash tests/lint.sh
vllm_status=0
wait "$vllm_install" || vllm_status=$?
trap - EXIT
cat "$vllm_log"
rm -f "$vllm_log"
if [ "$vllm_status" -ne 0 ]; then
  echo "tests/run.sh: setting up the vLLM environment failed (its output is above): bash tests/vllm/install.sh retries it" >&2
  exit 1
fi
# One run: the in-process engine's tests run here too (the holotron extra's transformers); the
# reference tier starts vLLM from .venv-vllm as a server process only.
# The slowest tests are listed at the end: where the next minutes of this command can be won.
exec .venv/bin/python -m pytest "${workers[@]}" --durations=15 "$@"
