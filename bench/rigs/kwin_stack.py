"""A headless KDE (KWin) Wayland stack for tests: private D-Bus session, PipeWire, WirePlumber, KWin, the KDE portal.

`KwinStack.start()` brings up, in a private temporary HOME and XDG_RUNTIME_DIR (mode 0700):
  dbus-daemon --session (xdg-desktop-portal and its KDE backend are D-Bus activated from it and
  inherit its environment: XDG_CURRENT_DESKTOP=KDE picks the KDE backend, WAYLAND_DISPLAY is KWin's,
  QT_QPA_PLATFORM=wayland puts the Qt portal on it), pipewire, wireplumber, and
  `kwin_wayland --virtual --width W --height H --no-lockscreen` (no screen, no GPU: Mesa's llvmpipe
  renders KWin's OpenGL scene). It waits, bounded, for KWin's Wayland socket, KWin on the bus, the
  portal's RemoteDesktop interface and a session the portal really starts (so it knows KWin's
  output); a failure raises StackError with the tail of every log, and a missing part is named by
  its Debian package (`DEBIAN_PACKAGES`).

What works on it and what does not (Debian 12: KWin and xdg-desktop-portal-kde 5.27.5, portal 1.16;
docs/testing.md, "KDE"): the portal grants a RemoteDesktop session with keyboard, pointer and one
stream of the output to a program outside a sandbox with no dialog at all (5.27 shows such a program
only a notification), and its pointer and keysym input reach native Wayland windows. The stream
sends no frame: KWin 5.27 records a screen cast of an output only when the output's backend emits
Output::outputChange, which only its DRM and nested-Wayland OpenGL backends do, and both need a DRM
render node (a GPU or vgem) that this machine has not.

Where it differs from a Plasma session:
- no plasmashell, no kded, no lock screen, no Breeze decorations: KWin alone, with its defaults;
- the keyboard's XKB layout(s) come from `keyboard_layout` (kxkbrc, as System Settings writes it)
  and key repeat is off (kcminputrc), for the reason gnome_stack gives for mutter;
- Debian installs /usr/bin/kwin_wayland with the file capability cap_sys_resource=ep; where that
  capability is outside this process's bounding set (a container), the kernel refuses to run the
  file at all ("Operation not permitted"). The stack then runs a copy in its own folder: a copy
  carries no file capabilities, and KWin runs without that one (it only raises its own limits).
Every component runs as the current user; none of them refuses root.

`env()` is what a client of this desktop needs (D-Bus, Wayland, runtime folder).
Run `python -m bench.rigs.kwin_stack` to start one and print its environment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.rigs.gnome_stack import _end_processes_with_env as end_processes_with_env
from bench.rigs.gnome_stack import own_portal_files

OUTPUT_SIZE = (1280, 800)
WAYLAND_SOCKET = "wayland-holodesk"
KWIN = "/usr/bin/kwin_wayland"
KDE_PORTAL = "/usr/lib/x86_64-linux-gnu/libexec/xdg-desktop-portal-kde"
PORTAL = "/usr/libexec/xdg-desktop-portal"
# What each part comes from (Debian 12). qtwayland5 is the Qt 5 Wayland platform the KDE portal
# (a Qt 5 program) needs; without it the portal aborts and xdg-desktop-portal quietly falls back to
# another backend.
QT5_WAYLAND_PLUGIN = "/usr/lib/x86_64-linux-gnu/qt5/plugins/platforms/libqwayland-generic.so"
_PARTS = {
    "dbus-daemon": "dbus-daemon",
    "pipewire": "pipewire",
    "wireplumber": "wireplumber",
    KWIN: "kwin-wayland",
    PORTAL: "xdg-desktop-portal",
    KDE_PORTAL: "xdg-desktop-portal-kde",
    QT5_WAYLAND_PLUGIN: "qtwayland5",
}
DEBIAN_PACKAGES = "dbus-daemon pipewire wireplumber kwin-wayland xdg-desktop-portal xdg-desktop-portal-kde qtwayland5"
CAP_SYS_RESOURCE = 24  # its bit in /proc/self/status's CapBnd
# What KWin logs (kwin_screencast) once a consumer is linked to a screen cast and it may send frames.
STREAMING_LOGGED = "state changed paused  ->  streaming"


class StackError(RuntimeError):
    """The headless KWin stack could not be brought up (the message holds the components' logs)."""


def missing_packages() -> list[str]:
    """The Debian packages of the stack's parts that are not installed, in `DEBIAN_PACKAGES` order."""
    missing = []
    for part, package in _PARTS.items():
        found = os.path.exists(part) if part.startswith("/") else shutil.which(part) is not None
        if not found and package not in missing:
            missing.append(package)
    return missing


def may_run_file_capabilities() -> bool:
    """Whether this process's bounding set holds CAP_SYS_RESOURCE, the capability Debian's
    kwin_wayland file carries (without it the kernel refuses to run that file)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return True


def kxkbrc(keyboard_layout: str) -> str:
    """KWin's keyboard settings file (as System Settings writes it) for XKB layouts like "de" or "us,ru"."""
    return f"[Layout]\nLayoutList={keyboard_layout}\nUse=true\n"


# No key repeat (see gnome_stack's SETTINGS_KEYFILE): KWin reads "KeyRepeat" from kcminputrc.
KCMINPUTRC = "[Keyboard]\nKeyRepeat=nothing\n"


class KwinStack:
    """The running stack. Use as a context manager or call start() / stop()."""

    def __init__(
        self, output_size: tuple[int, int] = OUTPUT_SIZE, start_timeout_s: float = 60.0, *, keyboard_layout: str = ""
    ) -> None:
        if keyboard_layout and not all(part.isalnum() for part in keyboard_layout.split(",")):
            raise ValueError(f"keyboard_layout must be XKB layout names separated by commas, got {keyboard_layout!r}")
        self.output_size = output_size
        self.keyboard_layout = keyboard_layout
        self.start_timeout_s = start_timeout_s
        self.root = Path(tempfile.mkdtemp(prefix="holodesk-kwin-"))
        self.home = self.root / "home"
        self.runtime_dir = self.root / "run"
        self.logs = self.root / "logs"
        self.bus_address = ""
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []

    # -- environment -------------------------------------------------------------------------------

    def base_env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key not in _SESSION_VARIABLES}
        env.update(
            HOME=str(self.home),
            XDG_RUNTIME_DIR=str(self.runtime_dir),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            XDG_CURRENT_DESKTOP="KDE",
            XDG_DESKTOP_PORTAL_DIR=str(self.root / "portals"),  # KDE's backend only (own_portal_files)
            XDG_SESSION_TYPE="wayland",
            WAYLAND_DISPLAY=WAYLAND_SOCKET,
            QT_QPA_PLATFORM="wayland",
            NO_AT_BRIDGE="1",
        )
        return env

    def env(self) -> dict[str, str]:
        """The environment a client of this desktop needs (D-Bus, Wayland, runtime folder)."""
        env = self.base_env()
        env["DBUS_SESSION_BUS_ADDRESS"] = self.bus_address
        return env

    # -- start / stop ------------------------------------------------------------------------------

    def start(self) -> KwinStack:
        """Start every part, bounded; on any failure the stack stops (its folder removed) and raises."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        missing = missing_packages()
        if missing:
            raise StackError(f"the headless KWin stack needs apt-get install {' '.join(missing)}")
        for folder in (self.home, self.runtime_dir, self.logs):
            folder.mkdir(parents=True, exist_ok=True)
        self.runtime_dir.chmod(0o700)
        own_portal_files(self.root / "portals", ("kde.portal",))
        config = self.home / ".config"
        config.mkdir(parents=True, exist_ok=True)
        (config / "kcminputrc").write_text(KCMINPUTRC, encoding="utf-8")
        if self.keyboard_layout:
            (config / "kxkbrc").write_text(kxkbrc(self.keyboard_layout), encoding="utf-8")
        deadline = time.monotonic() + self.start_timeout_s
        self._start_bus(deadline)
        self._spawn("pipewire", ["pipewire"])
        self._wait(lambda: (self.runtime_dir / "pipewire-0").exists(), "the PipeWire socket", deadline)
        self._spawn("wireplumber", ["wireplumber"])
        width, height = self.output_size
        kwin_env = self.env()
        del kwin_env["QT_QPA_PLATFORM"]  # KWin is the compositor: its Qt runs on its own platform
        # Its screen-cast log (stream states, buffers) shows where a stream stops: see STREAMING_LOGGED.
        kwin_env["QT_LOGGING_RULES"] = "kwin_screencast=true"
        self._spawn(
            "kwin",
            [
                self._kwin_binary(),
                "--virtual",
                f"--width={width}",
                f"--height={height}",
                f"--socket={WAYLAND_SOCKET}",
                "--no-lockscreen",
            ],
            env=kwin_env,
        )
        self._wait(lambda: (self.runtime_dir / WAYLAND_SOCKET).exists(), "KWin's Wayland socket", deadline)
        self._wait(lambda: self._has_name("org.kde.KWin"), "KWin on the session bus", deadline)
        # Asking the portal its RemoteDesktop version starts it (and its KDE backend) now.
        self._wait(self._portal_answers, "the desktop portal's RemoteDesktop interface", deadline)
        # The KDE backend learns KWin's outputs over Wayland after it starts, and until then ends every
        # Start with code 2 ("no screen to select" in the bus's log; seen once in CI, on a busy 2-core
        # machine). The stack is up once a session really starts.
        self._wait(self._portal_grants_a_session, "the KDE portal to know KWin's output", deadline)

    def _kwin_binary(self) -> str:
        if may_run_file_capabilities():
            return KWIN
        copy = self.root / "kwin_wayland"
        shutil.copyfile(KWIN, copy)  # a copy has no file capabilities (see the module docstring)
        copy.chmod(0o755)
        return str(copy)

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
        while b"\n" not in line:
            if time.monotonic() > deadline or process.poll() is not None:
                raise StackError("dbus-daemon did not print its address" + self.log_tail())
            chunk = process.stdout.read()
            if chunk:
                line += chunk
            else:
                time.sleep(0.02)
        # Only the first line: services the bus starts share its standard output (at-spi prints there).
        self.bus_address = line.split(b"\n", 1)[0].decode().strip()

    def _spawn(
        self, name: str, argv: list[str], *, capture_stdout: bool = False, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 - owned by the child, closed on stop
        process = subprocess.Popen(
            argv,
            env=env or (self.env() if self.bus_address else self.base_env()),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture_stdout else log,
            stderr=log,
            start_new_session=True,
        )
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

    def set_active_layout(self, index: int) -> None:
        """Make layout `index` (from 0) of `keyboard_layout` the active one, as the user's layout switch
        does (KWin's org.kde.keyboard D-Bus service); StackError when KWin does not take it."""
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection

        layouts = DBusAddress("/Layouts", bus_name="org.kde.keyboard", interface="org.kde.KeyboardLayouts")
        with open_dbus_connection(self.bus_address) as connection:
            taken = connection.send_and_get_reply(new_method_call(layouts, "setLayout", "u", (index,)), timeout=5)
            active = connection.send_and_get_reply(new_method_call(layouts, "getLayout"), timeout=5)
        if taken.body != (True,) or active.body != (index,):
            raise StackError(f"KWin did not make layout {index} of {self.keyboard_layout!r} active: {active.body}")

    def _portal_answers(self) -> bool:
        from jeepney.io.blocking import open_dbus_connection

        # heavy: the portal client (jeepney) is loaded only once the stack asks the portal
        from holodesk.automation.wayland.portal import PortalError, remote_desktop_version

        with open_dbus_connection(self.bus_address) as connection:
            try:
                return remote_desktop_version(connection, 20.0) >= 1
            except PortalError:
                return False

    def _portal_grants_a_session(self) -> bool:
        # heavy: the portal client (jeepney) is loaded only once the stack asks the portal
        from holodesk.automation.wayland.portal import PortalError, PortalSession

        try:
            session = PortalSession.open(bus_address=self.bus_address, timeout_s=10.0, consent_timeout_s=10.0)
        except PortalError:
            return False
        session.close()
        return True

    def _wait(self, ready: Callable[[], bool], what: str, deadline: float) -> None:
        while not ready():
            for name, process in self._processes:
                if process.poll() is not None:
                    exited = f"{name} exited with {process.returncode} while waiting for {what}"
                    raise StackError(exited + self.log_tail())
            if time.monotonic() > deadline:
                raise StackError(f"timed out after {self.start_timeout_s:g} s waiting for {what}" + self.log_tail())
            time.sleep(0.1)

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of each component's log (the bus's holds the portals'), for failure messages."""
        parts = []
        for log in sorted(self.logs.glob("*.log")) if self.logs.exists() else []:
            text = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"\n--- {log.name} ---\n" + "\n".join(text))
        return "".join(parts)

    def running(self) -> bool:
        """Whether every component the stack started itself is still running."""
        return bool(self._processes) and all(process.poll() is None for _name, process in self._processes)

    def stop(self) -> None:
        """End the components and the services the bus started for them, bounded; remove the folder."""
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
            if process.stdout is not None:
                process.stdout.close()
        self._processes.clear()
        # The portals were started by dbus-daemon in their own session groups and outlive it.
        end_processes_with_env("XDG_RUNTIME_DIR", str(self.runtime_dir))
        if shutil.which("fusermount3"):  # the document portal's FUSE mount, where FUSE exists
            subprocess.run(["fusermount3", "-u", "-z", str(self.runtime_dir / "doc")], capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> KwinStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# A client of the headless stack must not reach the developer's own desktop or session bus.
_SESSION_VARIABLES = frozenset(
    {"DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "SESSION_MANAGER", "DBUS_SESSION_BUS_ADDRESS", "QT_QPA_PLATFORM"}
)


if __name__ == "__main__":
    with KwinStack() as stack:
        for key in ("DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "WAYLAND_DISPLAY", "HOME"):
            print(f"export {key}={stack.env()[key]}")
        print("running; Ctrl+C stops it")
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(1)
