"""A headless sway (wlroots) Wayland desktop for tests: one output of a fixed size, nothing else.

`SwayStack.start()` runs `sway` with WLR_BACKENDS=headless (no screen, no GPU), WLR_RENDERER=pixman
(software rendering) and WLR_LIBINPUT_NO_DEVICES=1 (no real keyboard or mouse: input comes only
from the virtual-keyboard and virtual-pointer protocols), in a private temporary folder: its own
XDG_RUNTIME_DIR (mode 0700) and its own config file. It waits, bounded, until sway answers on its IPC
socket with the output at the asked size; a failure raises StackError with sway's log, in words
(sway missing names the Debian package).

Where it differs from a desktop sway:
- the config is ours, not the user's: one headless output of `output_size` at (0, 0), no bar, no
  wallpaper (swaybg), no borders, no XWayland unless `xwayland` asks for it (`xwayland force`; its
  display name from `x_display()`, which as root also admits root's clients with xhost: XWayland
  admits only sway's user), no key repeat, and the keyboards' XKB layout only when `keyboard_layout`
  asks for one; more outputs come from `swaymsg create_output`;
- no D-Bus session: sway needs none, and nothing here (grim, wtype, Wayland clients) asks for one;
  xdg-desktop-portal-wlr would (its ScreenCast failed headless here, DESIGN notes);
- sway refuses to run as root; as root the stack runs it as the unprivileged `nobody` (65534), so its
  runtime folder belongs to that uid. Clients get a runtime folder of their own and WAYLAND_DISPLAY
  as the socket's absolute path (libwayland accepts one), so they never use sway's folder as theirs.

`env()` is what a client of this desktop needs (WAYLAND_DISPLAY, XDG_RUNTIME_DIR, SWAYSOCK).
Run `python -m bench.rigs.sway_stack` to start one and print its environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.rigs.gnome_stack import own_portal_files

OUTPUT_SIZE = (1024, 768)
OUTPUT_NAME = "HEADLESS-1"  # wlroots' name for the headless backend's first output
DEBIAN_PACKAGE = "sway"
NOBODY = 65534  # the unprivileged uid and gid sway runs as when the stack is started by root


class StackError(RuntimeError):
    """The headless sway stack could not be brought up or asked (the message holds sway's log)."""


def sway_config(size: tuple[int, int], keyboard_layout: str = "", *, xwayland: bool = False) -> str:
    """The stack's own sway config: one output of `size`, no bar, no key repeat, XWayland only with
    `xwayland` (started at once), and the keyboards' XKB layout(s) when `keyboard_layout` is given
    (e.g. "de" or "us,ru"), as a user sets it."""
    width, height = size
    layout = [f"input type:keyboard xkb_layout {keyboard_layout}"] if keyboard_layout else []
    # No `bar` block: sway then starts no swaybar. No `output * bg`: no swaybg.
    return "\n".join(
        [
            f"output {OUTPUT_NAME} resolution {width}x{height} position 0 0",
            "xwayland force" if xwayland else "xwayland disable",
            "default_border none",
            "default_floating_border none",
            "focus_follows_mouse no",
            # A stalled test machine must not turn one press into many (see gnome_stack's SETTINGS_KEYFILE).
            "input type:keyboard repeat_rate 0",
            *layout,
            "",
        ]
    )


class SwayStack:
    """The running headless sway. Use as a context manager or call start() / stop()."""

    def __init__(
        self,
        output_size: tuple[int, int] = OUTPUT_SIZE,
        start_timeout_s: float = 30.0,
        *,
        keyboard_layout: str = "",
        xwayland: bool = False,
    ) -> None:
        if keyboard_layout and not all(part.isalnum() for part in keyboard_layout.split(",")):
            raise ValueError(f"keyboard_layout must be XKB layout names separated by commas, got {keyboard_layout!r}")
        self.output_size = output_size
        self.keyboard_layout = keyboard_layout
        self.xwayland = xwayland
        self.start_timeout_s = start_timeout_s
        self.root = Path(tempfile.mkdtemp(prefix="holodesk-sway-"))
        self.sway_runtime_dir = self.root / "sway-run"
        self.client_runtime_dir = self.root / "client-run"
        self.home = self.root / "home"
        self.config = self.root / "config"
        self.log = self.root / "sway.log"
        self.wayland_socket = ""  # absolute path, once sway made it
        self.ipc_socket = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._as_nobody = False

    # -- environment -------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The environment a client of this desktop needs (no X display, no inherited session bus)."""
        env = {key: value for key, value in os.environ.items() if key not in _SESSION_VARIABLES}
        env.update(
            XDG_RUNTIME_DIR=str(self.client_runtime_dir),
            WAYLAND_DISPLAY=self.wayland_socket,
            SWAYSOCK=self.ipc_socket,
            XDG_SESSION_TYPE="wayland",
            XDG_CURRENT_DESKTOP="sway",
            # A portal a client starts (dbus-run-session) sees the backends of a Debian 12 desktop without
            # KDE: with KDE's installed too (the kde tier), portal 1.16 would hand it RemoteDesktop.
            XDG_DESKTOP_PORTAL_DIR=str(self.root / "portals"),
        )
        return env

    def _sway_env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key not in _SESSION_VARIABLES}
        env.update(
            HOME=str(self.home),
            XDG_RUNTIME_DIR=str(self.sway_runtime_dir),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            WLR_BACKENDS="headless",
            WLR_RENDERER="pixman",
            WLR_LIBINPUT_NO_DEVICES="1",
        )
        return env

    # -- start / stop ------------------------------------------------------------------------------

    def start(self) -> SwayStack:
        if shutil.which("sway") is None:
            raise StackError(f"the headless sway stack needs sway: apt-get install {DEBIAN_PACKAGE}")
        as_nobody = self._as_nobody = os.geteuid() == 0
        self.root.chmod(0o755)  # sway, as nobody, reads its config here
        for folder in (self.sway_runtime_dir, self.client_runtime_dir, self.home):
            folder.mkdir(mode=0o700)
        if as_nobody:
            for folder in (self.sway_runtime_dir, self.home):
                os.chown(folder, NOBODY, NOBODY)
        config = sway_config(self.output_size, self.keyboard_layout, xwayland=self.xwayland)
        self.config.write_text(config, encoding="utf-8")
        self.config.chmod(0o644)
        own_portal_files(self.root / "portals", ("gnome.portal", "gtk.portal"))
        deadline = time.monotonic() + self.start_timeout_s
        try:
            with self.log.open("wb") as log:
                self._process = subprocess.Popen(
                    ["sway", "--config", str(self.config)],
                    env=self._sway_env(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                    user=NOBODY if as_nobody else None,
                    group=NOBODY if as_nobody else None,
                    extra_groups=[] if as_nobody else None,
                )
            self._wait(self._found_sockets, "sway's Wayland and IPC sockets", deadline)
            self._wait(self._output_ready, f"sway's output {OUTPUT_NAME} at {self._size_words()}", deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _size_words(self) -> str:
        return f"{self.output_size[0]}x{self.output_size[1]}"

    def _found_sockets(self) -> bool:
        # sway names its socket itself (wayland-N); the folder is ours, so the one there is its.
        wayland = [path for path in self.sway_runtime_dir.glob("wayland-*") if not path.name.endswith(".lock")]
        ipc = list(self.sway_runtime_dir.glob("sway-ipc.*.sock"))
        if wayland and ipc:
            self.wayland_socket, self.ipc_socket = str(wayland[0]), str(ipc[0])
        return bool(self.wayland_socket)

    def _output_ready(self) -> bool:
        outputs = self.swaymsg("get_outputs")
        return any(
            isinstance(output, dict)
            and output.get("name") == OUTPUT_NAME
            and output.get("active")
            and (output.get("rect", {}).get("width"), output.get("rect", {}).get("height")) == self.output_size
            for output in (outputs if isinstance(outputs, list) else [])
        )

    def x_display(self) -> str:
        """XWayland's display name (":N"), as sway gives it to the programs it starts; StackError in words."""
        if not self.xwayland:
            raise StackError("this sway runs without XWayland (SwayStack(xwayland=True) starts it)")
        answer = self.home / "x-display"
        if not answer.exists():
            self.swaymsg("command", f"exec echo $DISPLAY > {answer}.part && mv {answer}.part {answer}")
            self._wait(answer.exists, "sway's XWayland display name", time.monotonic() + self.start_timeout_s)
        name = answer.read_text().strip()
        if not name.startswith(":"):
            raise StackError(f"sway gives its programs no XWayland display (DISPLAY={name!r})" + self.log_tail())
        if self._as_nobody and not (granted := self.home / "x-granted").exists():
            # XWayland admits only its own user (nobody here): the tests' clients run as root.
            self.swaymsg(
                "command",
                f"exec DISPLAY={name} xhost +si:localuser:root > {granted}.part 2>&1 && mv {granted}.part {granted}",
            )
            self._wait(
                granted.exists, "xhost admitting root to sway's XWayland", time.monotonic() + self.start_timeout_s
            )
        return name

    def swaymsg(self, kind: str, *command: str) -> object:
        """sway's JSON answer to an IPC message (`swaymsg -t KIND COMMAND...`); StackError in words."""
        try:
            done = subprocess.run(
                ["swaymsg", "--raw", "-t", kind, *command],
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise StackError(f"swaymsg -t {kind} got no answer within 10 s" + self.log_tail()) from None
        if done.returncode != 0:
            raise StackError(f"swaymsg -t {kind} failed: {done.stderr.strip() or done.stdout.strip()}")
        answer: object = json.loads(done.stdout)
        return answer

    def _wait(self, ready: Callable[[], bool], what: str, deadline: float) -> None:
        while not ready():
            process = self._process
            if process is not None and process.poll() is not None:
                raise StackError(f"sway exited with {process.returncode} while waiting for {what}" + self.log_tail())
            if time.monotonic() > deadline:
                raise StackError(f"timed out after {self.start_timeout_s:g} s waiting for {what}" + self.log_tail())
            time.sleep(0.05)

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of sway's log, for failure messages."""
        if not self.log.exists():
            return ""
        return "\n--- sway.log ---\n" + "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    @property
    def pid(self) -> int | None:
        """sway's process id while it was started (None before start and after stop)."""
        return self._process.pid if self._process is not None else None

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """End sway and every client in its process group, bounded, and remove the stack's folder."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
            # What outlives sway's own exit in its group: wlroots' XWayland launcher (a forked sway) and
            # XWayland under it were left running after a SIGTERM that ended sway (seen with xwayland).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> SwayStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# A client of the headless stack must not reach the developer's own desktop or session bus.
_SESSION_VARIABLES = frozenset(
    {"DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "SWAYSOCK", "DBUS_SESSION_BUS_ADDRESS", "QT_QPA_PLATFORM"}
)


if __name__ == "__main__":
    with SwayStack() as stack:
        for key in ("XDG_RUNTIME_DIR", "WAYLAND_DISPLAY", "SWAYSOCK"):
            print(f"export {key}={stack.env()[key]}")
        print("running; Ctrl+C stops it")
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(1)
