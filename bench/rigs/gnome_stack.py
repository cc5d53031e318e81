"""A headless GNOME Wayland stack for tests: private D-Bus session, PipeWire, WirePlumber, mutter.

`GnomeStack.start()` brings up, in a private temporary HOME and XDG_RUNTIME_DIR:
  dbus-daemon --session (the portal and its GNOME backend are D-Bus activated from it, and inherit
  its environment: HOME, XDG_RUNTIME_DIR, XDG_CURRENT_DESKTOP=GNOME, WAYLAND_DISPLAY, so no
  dbus-update-activation-environment is needed), pipewire, wireplumber, and
  `mutter --headless --wayland --no-x11 --virtual-monitor 1280x800`.
With `xwayland=True`, mutter runs without --no-x11 and starts XWayland (as GNOME sessions do): the
stack then knows the public X display mutter chose and its Xauthority file, and `env()` exports
DISPLAY and XAUTHORITY (the portal services keep a Wayland-only environment, like a real session's).
With `layouts_hand=True`, mutter runs in a Python process through its library
(bench/rigs/mutter_keyboard.py) so that `set_keymap` can give it layouts and the active one, as
gnome-shell does in a GNOME session (a bare mutter keeps "us"). Every wait is bounded; a failure
raises StackError with the tail of every component's log, so CI
shows why instead of skipping. Components run as the current user: none of the GNOME path's refuses
root (seen on Debian 12, as root in a container; only sway, not used here, does).

`answer_consent` is the test's hand on the portal's permission dialog: it finds the dialog in
mutter's own screen cast (bench.rigs.mutter_remote) and clicks its switch and buttons with
mutter's own virtual pointer. The product never answers its own dialog.

XWayland's socket folder: mutter 43 puts XWayland's socket in /tmp/.X11-unix and refuses to start it
when that folder is missing (it then makes one itself with the wrong mode: "Directory /tmp/.X11-unix
is not writable"). A desktop has it from systemd-tmpfiles at boot; a fresh machine that never ran an
X server has not, so `start()` makes it as systemd-tmpfiles does (root-owned, 1777) first, or says
in words what to run where it cannot (`ensure_x11_socket_folder`).

Run `python -m bench.rigs.gnome_stack [--xwayland]` to start the stack and print its environment.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.rigs.mutter_remote import MutterRemote

MONITOR_SIZE = (1280, 800)
WAYLAND_SOCKET = "wayland-holodesk"
DEBIAN_PACKAGES = (
    "dbus-daemon mutter pipewire pipewire-bin wireplumber xdg-desktop-portal xdg-desktop-portal-gnome "
    "gstreamer1.0-pipewire gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 python3-gi"
)
_BINARIES = ("dbus-daemon", "pipewire", "wireplumber", "mutter")
_PORTALS = ("/usr/libexec/xdg-desktop-portal", "/usr/libexec/xdg-desktop-portal-gnome")
SYSTEM_PORTAL_FILES = Path("/usr/share/xdg-desktop-portal/portals")


def own_portal_files(folder: Path, names: tuple[str, ...]) -> Path:
    """A folder holding only the named backends' .portal files, for XDG_DESKTOP_PORTAL_DIR.

    xdg-desktop-portal 1.16 hands an interface that no backend of the current desktop offers to any
    installed backend that does: with the KDE portal installed too (the kde tier), a GNOME stack's
    GlobalShortcuts went to KDE's. A stack that sees only its own desktop's files behaves as on a
    computer with that desktop alone.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        source = SYSTEM_PORTAL_FILES / name
        if source.is_file():
            (folder / name).write_bytes(source.read_bytes())
    return folder


# mutter run through its library (layouts_hand=True): the system Python with python3-gi, and the
# Meta typelib where Debian's gir1.2-mutter-11 installs it.
SYSTEM_PYTHON = "/usr/bin/python3"
MUTTER_TYPELIBS = "/usr/lib/x86_64-linux-gnu/mutter-11"
GI_PACKAGES = "python3-gi gir1.2-mutter-11"
# The desktop's settings (GLib's keyfile backend, read by mutter and the portal). No key repeat: on a
# loaded machine a key's release can reach mutter more than the repeat delay after its press, and
# the program repeats the key (XWayland for X programs: a loaded run typed "jummmps over theeee"
# into Chromium, 1 run in 10). Holodesk sends each press and its release back to back; a repeat is
# the machine's stall, not the input under test. mutter tells every program (XWayland included)
# to repeat or not (wl_keyboard.repeat_info); `xset r off` does not hold, a keymap change resets it.
SETTINGS_KEYFILE = """[org/gnome/desktop/peripherals/keyboard]
repeat=false
"""
# GNOME's accent blue: the dialog's default ("Share") button and a switch that is on.
ACCENT_BLUE = (53, 132, 228)


class StackError(RuntimeError):
    """The headless stack could not be brought up (the message holds the components' logs)."""


X11_SOCKET_FOLDER = Path("/tmp/.X11-unix")
# What systemd-tmpfiles' x11.conf makes at boot: "D! /tmp/.X11-unix 1777 root root".
X11_SOCKET_MODE = 0o1777


def ensure_x11_socket_folder(folder: Path = X11_SOCKET_FOLDER) -> None:
    """Make `folder` as systemd-tmpfiles would (root-owned, mode 1777), or refuse in words.

    A folder already there is used only when it is a real folder with mode 1777, owned by root or by
    this user (mutter's own rule); anything else raises StackError naming the command that makes it
    right, and nothing is changed.
    """
    fix = f"sudo rm -rf {folder} && sudo install -d -o root -g root -m 1777 {folder}"
    try:
        found = folder.lstat()
    except FileNotFoundError:
        if os.geteuid() != 0:
            raise StackError(
                f"XWayland needs {folder} (root-owned, mode 1777, as systemd-tmpfiles makes it at boot) and it is "
                f"missing; only root can make it: sudo install -d -o root -g root -m 1777 {folder}"
            ) from None
        with contextlib.suppress(FileExistsError):  # another stack or X server made it meanwhile
            folder.mkdir()
            folder.chmod(X11_SOCKET_MODE)  # mkdir's mode passes through the umask; chmod's does not
        found = folder.lstat()
    if not stat.S_ISDIR(found.st_mode):
        raise StackError(f"{folder} is not a folder (XWayland keeps its sockets there): {fix}")
    # mutter trusts a folder owned by root or by its own user (another owner could take its socket).
    if found.st_uid not in (0, os.geteuid()) or stat.S_IMODE(found.st_mode) != X11_SOCKET_MODE:
        raise StackError(
            f"{folder} is owned by uid {found.st_uid} with mode {stat.S_IMODE(found.st_mode):o}; XWayland needs it "
            f"root-owned with mode 1777: {fix}"
        )


def mutter_version() -> tuple[int, ...]:
    """The installed mutter's version, e.g. (43, 8), from `mutter --version`; () when it cannot be read."""
    try:
        out = subprocess.run(["mutter", "--version"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    found = re.search(r"mutter (\d+)(?:\.(\d+))?", out)
    return tuple(int(part) for part in found.groups() if part is not None) if found else ()


def missing_components() -> list[str]:
    """Binaries the stack needs that are not installed."""
    missing = [name for name in _BINARIES if shutil.which(name) is None]
    missing += [path for path in _PORTALS if not os.path.exists(path)]
    return missing


class GnomeStack:
    """The running stack. Use as a context manager or call start() / stop()."""

    def __init__(
        self,
        root: Path | None = None,
        start_timeout_s: float = 60.0,
        *,
        xwayland: bool = False,
        layouts_hand: bool = False,
    ) -> None:
        self.xwayland = xwayland
        self.layouts_hand = layouts_hand
        self._mutter: subprocess.Popen[bytes] | None = None
        self.x_display = ""  # ":N", once XWayland answers (xwayland=True)
        self.xauthority = ""
        self._own_root = root is None
        self.root = root or Path(tempfile.mkdtemp(prefix="holodesk-gnome-"))
        self.home = self.root / "home"
        self.runtime_dir = self.root / "run"
        self.logs = self.root / "logs"
        self.start_timeout_s = start_timeout_s
        self.bus_address = ""
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []

    # -- environment -------------------------------------------------------------------------------

    def base_env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key not in ("DISPLAY", "WAYLAND_DISPLAY")}
        for key in ("DBUS_SESSION_BUS_ADDRESS", "XAUTHORITY", "SESSION_MANAGER", "QT_QPA_PLATFORM"):
            env.pop(key, None)
        env.update(
            HOME=str(self.home),
            XDG_RUNTIME_DIR=str(self.runtime_dir),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            XDG_CURRENT_DESKTOP="GNOME",
            XDG_SESSION_TYPE="wayland",
            WAYLAND_DISPLAY=WAYLAND_SOCKET,
            XDG_DESKTOP_PORTAL_DIR=str(self.root / "portals"),  # GNOME's backends only (own_portal_files)
            GSETTINGS_BACKEND="keyfile",  # SETTINGS_KEYFILE, written at start: the stack's own settings
            NO_AT_BRIDGE="1",
            GTK_A11Y="none",
        )
        return env

    def env(self) -> dict[str, str]:
        """The environment a client of this desktop needs (D-Bus, Wayland, runtime dir)."""
        env = self.base_env()
        env["DBUS_SESSION_BUS_ADDRESS"] = self.bus_address
        if self.x_display:
            env["DISPLAY"] = self.x_display
            env["XAUTHORITY"] = self.xauthority
        return env

    # -- start / stop ----------------------------------------------------------------------------

    def start(self) -> GnomeStack:
        missing = missing_components()
        if missing:
            raise StackError(f"the headless GNOME stack needs {', '.join(missing)}: apt-get install {DEBIAN_PACKAGES}")
        for folder in (self.home, self.runtime_dir, self.logs):
            folder.mkdir(parents=True, exist_ok=True)
        own_portal_files(self.root / "portals", ("gnome.portal", "gtk.portal"))
        keyfile = self.home / ".config" / "glib-2.0" / "settings" / "keyfile"
        keyfile.parent.mkdir(parents=True, exist_ok=True)
        keyfile.write_text(SETTINGS_KEYFILE, encoding="utf-8")
        self.runtime_dir.chmod(0o700)
        if self.xwayland:
            ensure_x11_socket_folder()
        deadline = time.monotonic() + self.start_timeout_s
        try:
            self._start_bus(deadline)
            self._spawn("pipewire", ["pipewire"])
            self._wait(lambda: (self.runtime_dir / "pipewire-0").exists(), "the PipeWire socket", deadline)
            self._spawn("wireplumber", ["wireplumber"])
            width, height = MONITOR_SIZE
            x11 = [] if self.xwayland else ["--no-x11"]
            self._mutter = self._spawn(
                "mutter",
                [
                    *self._mutter_command(),
                    "--headless",
                    "--wayland",
                    *x11,
                    f"--wayland-display={WAYLAND_SOCKET}",
                    "--virtual-monitor",
                    f"{width}x{height}",
                ],
            )
            self._wait(lambda: (self.runtime_dir / WAYLAND_SOCKET).exists(), "mutter's Wayland socket", deadline)
            if self.xwayland:
                self._wait_for_xwayland(deadline)
            self._wait(lambda: self._has_name("org.gnome.Mutter.ScreenCast"), "mutter's ScreenCast API", deadline)
            self._wait(lambda: self._has_name("org.gnome.Mutter.RemoteDesktop"), "mutter's RemoteDesktop API", deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _mutter_command(self) -> list[str]:
        if not self.layouts_hand:
            return ["mutter"]
        if not Path(SYSTEM_PYTHON).exists() or not Path(MUTTER_TYPELIBS, "Meta-11.typelib").exists():
            raise StackError(
                f"mutter with a hand on its layouts needs {SYSTEM_PYTHON} and apt-get install {GI_PACKAGES}"
            )
        return [SYSTEM_PYTHON, str(Path(__file__).with_name("mutter_keyboard.py"))]

    def set_keymap(self, layouts: str, group: int, timeout_s: float = 10.0) -> None:
        """Give mutter `layouts` (e.g. "us,ru") with `group` (from 0) active, as gnome-shell does."""
        process = self._mutter
        if not self.layouts_hand or process is None or process.stdin is None or process.stdout is None:
            raise StackError("this stack was started without layouts_hand=True")
        command = f"keymap {layouts} {group}\n".encode()
        process.stdin.write(command)
        process.stdin.flush()
        answer = b""
        deadline = time.monotonic() + timeout_s
        while not answer.endswith(b"\n"):
            if time.monotonic() > deadline or process.poll() is not None:
                raise StackError(f"mutter did not take the layouts {layouts} ({answer!r})" + self.log_tail())
            chunk = process.stdout.read()
            if chunk:
                answer += chunk
            else:
                time.sleep(0.02)
        if answer != command:
            raise StackError(f"mutter answered {answer!r} to {command!r}" + self.log_tail())

    def _wait_for_xwayland(self, deadline: float) -> None:
        """Learn XWayland's display and Xauthority file from mutter, then wait until it answers."""
        if shutil.which("xdpyinfo") is None:
            raise StackError("the XWayland stack needs xdpyinfo: apt-get install x11-utils")
        log = self.logs / "mutter.log"
        # mutter 43 logs "Using public X11 display :1, (using :2 for managed services)".
        found: list[str] = []

        def display_logged() -> bool:
            match = re.search(r"Using public X11 display (:\d+)", log.read_text(errors="replace"))
            if match:
                found.append(match.group(1))
            return bool(match)

        self._wait(display_logged, "mutter to name its XWayland display", deadline)
        auth = sorted(self.runtime_dir.glob(".mutter-Xwaylandauth.*"))
        if not auth:
            raise StackError("mutter started XWayland without an Xauthority file" + self.log_tail())
        self.x_display, self.xauthority = found[0], str(auth[0])
        env = self.env()

        def answers() -> bool:
            probe = subprocess.run(["xdpyinfo"], env=env, capture_output=True, check=False, timeout=10)
            return probe.returncode == 0

        self._wait(answers, f"XWayland on {self.x_display}", deadline)

    def _start_bus(self, deadline: float) -> None:
        address = f"unix:path={self.runtime_dir / 'bus'}"
        process = self._spawn(
            "dbus-daemon",
            ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address={address}", "--print-address=1"],
            capture_stdout=True,
        )
        assert process.stdout is not None
        os.set_blocking(process.stdout.fileno(), False)
        line = b""
        while not line.endswith(b"\n"):
            if time.monotonic() > deadline or process.poll() is not None:
                raise StackError("dbus-daemon did not print its address" + self.log_tail())
            chunk = process.stdout.read()
            if chunk:
                line += chunk
            else:
                time.sleep(0.02)
        self.bus_address = line.decode().strip()

    def _spawn(self, name: str, argv: list[str], capture_stdout: bool = False) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 - owned by the child, closed on stop
        commanded = name == "mutter" and self.layouts_hand
        env = self.env() if self.bus_address else self.base_env()
        if commanded:
            env["GI_TYPELIB_PATH"] = MUTTER_TYPELIBS
        process = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.PIPE if commanded else subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture_stdout or commanded else log,
            stderr=log,
            start_new_session=True,
        )
        if commanded:
            assert process.stdout is not None
            os.set_blocking(process.stdout.fileno(), False)
        self._processes.append((name, process))
        return process

    def _has_name(self, name: str) -> bool:
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection

        with open_dbus_connection(self.bus_address) as connection:
            bus = DBusAddress(
                "/org/freedesktop/DBus", bus_name="org.freedesktop.DBus", interface="org.freedesktop.DBus"
            )
            reply = connection.send_and_get_reply(new_method_call(bus, "NameHasOwner", "s", (name,)), timeout=5)
            return bool(reply.body[0])

    def _wait(self, ready: Callable[[], bool], what: str, deadline: float) -> None:
        while not ready():
            for name, process in self._processes:
                if process.poll() is not None:
                    exited = f"{name} exited with {process.returncode} while waiting for {what}"
                    raise StackError(exited + self.log_tail())
            if time.monotonic() > deadline:
                raise StackError(f"timed out after {self.start_timeout_s:g} s waiting for {what}" + self.log_tail())
            time.sleep(0.05)

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of each component's log, for failure messages."""
        parts = []
        for log in sorted(self.logs.glob("*.log")) if self.logs.exists() else []:
            text = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"\n--- {log.name} ---\n" + "\n".join(text))
        return "".join(parts)

    def stop(self) -> None:
        for _name, process in reversed(self._processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for _name, process in reversed(self._processes):
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()
        mutter_pids = {str(process.pid) for name, process in self._processes if name == "mutter"}
        self._processes.clear()
        _remove_x_locks_of(mutter_pids)
        # D-Bus activated services (the portals) were started by dbus-daemon in its own session
        # group and outlive it; end those that belong to this stack's runtime folder.
        _end_processes_with_env("XDG_RUNTIME_DIR", str(self.runtime_dir))
        if self._own_root:
            if shutil.which("fusermount3"):  # the document portal's FUSE mount, where FUSE exists
                subprocess.run(
                    ["fusermount3", "-u", "-z", str(self.runtime_dir / "doc")], capture_output=True, check=False
                )
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> GnomeStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _remove_x_locks_of(pids: set[str]) -> None:
    """Remove the X display lock files and sockets mutter made for XWayland: it leaves them on SIGTERM."""
    for lock in Path("/tmp").glob(".X*-lock"):
        try:
            owner = lock.read_text().strip()
        except OSError:
            continue
        if owner in pids:
            number = lock.name[2:-5]
            for path in (lock, Path("/tmp/.X11-unix") / f"X{number}"):
                with contextlib.suppress(OSError):
                    path.unlink()


def _end_processes_with_env(key: str, value: str) -> None:
    """SIGTERM (then SIGKILL) every process whose environment has key=value (this stack's own)."""
    marker = f"{key}={value}".encode()
    victims = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                victims.append(int(entry.name))
        except OSError:
            continue
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 3
    for pid in victims:
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _accent_box(frame: np.ndarray) -> tuple[int, int, int, int] | None:
    """Bounding box (x0, y0, x1, y1) of GNOME accent-blue pixels in a BGRx frame, or None."""
    rgb = frame[:, :, 2::-1].astype(np.int16)
    mask = np.abs(rgb - np.array(ACCENT_BLUE, dtype=np.int16)).sum(axis=2) < 30
    ys, xs = np.nonzero(mask)
    if xs.size < 200:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())


def _switch_centre(frame: np.ndarray, share: tuple[int, int, int, int]) -> tuple[int, int] | None:
    """Centre of the off switch's grey track: solid light grey, below and left of the Share button."""
    x0, y0 = max(0, share[0] - 100), share[3] + 80
    x1, y1 = share[2] + 5, min(frame.shape[0], share[3] + 320)
    region = frame[y0:y1, x0:x1, :3].astype(np.int16)
    grey = (region.max(axis=2) - region.min(axis=2) < 4) & (region[:, :, 0] >= 200) & (region[:, :, 0] <= 228)
    k = 7
    padded = np.pad(grey.astype(np.int32), ((1, 0), (1, 0)))
    sums = padded.cumsum(0).cumsum(1)
    solid = sums[k:, k:] - sums[:-k, k:] - sums[k:, :-k] + sums[:-k, :-k] == k * k
    ys, xs = np.nonzero(solid)
    if xs.size == 0:
        return None
    return int((xs.min() + xs.max()) // 2 + x0 + k // 2), int((ys.min() + ys.max()) // 2 + y0 + k // 2)


def _save_debug_frame(frame: np.ndarray, name: str) -> None:
    """Keep the frame a dialog lookup failed on, for the failure report (HOLODESK_DEBUG_DIR)."""
    folder = os.environ.get("HOLODESK_DEBUG_DIR")
    if folder:
        from PIL import Image

        Image.fromarray(np.ascontiguousarray(frame[:, :, 2::-1])).save(Path(folder) / f"{name}.png")


def _wait_for_switch_on(remote: object, switch: tuple[int, int], timeout_s: float) -> bool:
    """True once the switch around `switch` shows the accent colour (it is on)."""

    assert isinstance(remote, MutterRemote)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.1)
        frame = remote.screenshot()
        area = frame[switch[1] - 12 : switch[1] + 12, switch[0] - 40 : switch[0] + 40]
        rgb = area[:, :, 2::-1].astype(np.int16)
        if int((np.abs(rgb - np.array(ACCENT_BLUE, dtype=np.int16)).sum(axis=2) < 30).sum()) > 100:
            return True
    return False


def _settled_dialog(
    remote: object, deadline: float, timeout_s: float
) -> tuple[np.ndarray, tuple[int, int, int, int], tuple[int, int]]:
    """The dialog's frame, Share button and switch once two frames in a row show both in the same place.

    Waiting a fixed time for the first layout was too short under load (a loaded run found no
    switch): the dialog is answered once it is drawn and still, or StackError at the deadline.
    """

    assert isinstance(remote, MutterRemote)
    seen: tuple[tuple[int, int, int, int], tuple[int, int]] | None = None
    frame: np.ndarray | None = None
    while time.monotonic() < deadline:
        time.sleep(0.1)
        frame = remote.screenshot()
        share_box = _accent_box(frame)
        switch = _switch_centre(frame, share_box) if share_box is not None else None
        if share_box is not None and switch is not None:
            if seen == (share_box, switch):
                return frame, share_box, switch
            seen = (share_box, switch)
    if frame is not None:
        _save_debug_frame(frame, "dialog-not-found")
    if seen is None and (frame is None or _accent_box(frame) is None):
        raise StackError(f"the portal's permission dialog did not show within {timeout_s:g} s")
    raise StackError(
        f"the dialog's 'Allow remote interaction' switch was not found (or still moving) within {timeout_s:g} s"
    )


def answer_consent(
    remote: object, *, share: bool = True, allow_interaction: bool = True, timeout_s: float = 90.0
) -> None:
    """Answer the portal's 'Remote desktop' dialog once it shows, as a user would, with mutter's pointer.

    `remote` is a bench.rigs.mutter_remote.MutterRemote. Raises StackError if the dialog never
    shows or does not react. The wait ends once the dialog is drawn; its bound is long because a
    loaded fresh machine once took over 30 s to start the portal and show it.
    """

    assert isinstance(remote, MutterRemote)
    deadline = time.monotonic() + timeout_s
    frame, share_box, switch = _settled_dialog(remote, deadline, timeout_s)
    share_centre = ((share_box[0] + share_box[2]) // 2, (share_box[1] + share_box[3]) // 2)
    # Wake mutter's virtual pointer: the first events after a device appears are dropped.
    remote.move(share_centre[0], share_box[3] + 380)  # below the dialog: no hover effects
    time.sleep(0.3)
    if not share:
        # Cancel mirrors Share across the centred dialog.
        remote.click(frame.shape[1] - 1 - share_centre[0], share_centre[1])
        return
    if allow_interaction:
        # Click the row's label, not the switch: GTK 4's switch ignored mutter's virtual clicks here,
        # while its row (an activatable AdwActionRow) toggles the switch on a click.
        row_label = (frame.shape[1] - 1 - switch[0] + 60, switch[1])
        for _attempt in range(2):  # a click that landed before the dialog took input is retried once
            remote.click(*row_label)
            if _wait_for_switch_on(remote, switch, min(3.0, max(0.0, deadline - time.monotonic()))):
                break
        else:
            _save_debug_frame(remote.screenshot(), "switch-stayed-off")
            raise StackError(f"the 'Allow remote interaction' switch at {switch} did not turn on")
    remote.click(*share_centre)


if __name__ == "__main__":
    import sys

    with GnomeStack(xwayland="--xwayland" in sys.argv[1:]) as stack:
        for key in ("DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "WAYLAND_DISPLAY", "DISPLAY", "XAUTHORITY", "HOME"):
            if key in stack.env():
                print(f"export {key}={stack.env()[key]}")
        print("running; Ctrl+C stops it")
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
