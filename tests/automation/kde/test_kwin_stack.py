"""The headless KWin stack itself: its refusal in words, its output and portal backend, and a clean stop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection

from bench.rigs.kwin_stack import StackError
from holodesk.automation.wayland.portal import remote_desktop_version
from tests.automation.kde.conftest import open_portal, started_stack


def test_missing_parts_are_refused_naming_the_debian_packages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bench.rigs.kwin_stack import KwinStack

    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no dbus-daemon, pipewire, wireplumber on it
    stack = KwinStack()
    # The packages of the absolute paths follow where they are not installed (the quick tier has none).
    with pytest.raises(StackError, match=r"needs apt-get install dbus-daemon pipewire wireplumber( |$)"):
        stack.start()
    assert not stack.root.exists()  # a refused start leaves no folder behind


def _processes_with(runtime_dir: Path) -> list[str]:
    """The processes whose environment names this runtime folder (the stack's own, the portals too)."""
    marker = f"XDG_RUNTIME_DIR={runtime_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(f"{entry.name} {(entry / 'comm').read_text().strip()}")
            except OSError:
                continue
    return found


def _bus_names(bus_address: str) -> list[str]:
    with open_dbus_connection(bus_address) as connection:
        bus = DBusAddress("/org/freedesktop/DBus", bus_name="org.freedesktop.DBus", interface="org.freedesktop.DBus")
        return list(connection.send_and_get_reply(new_method_call(bus, "ListNames"), timeout=5).body[0])


@pytest.mark.display
@pytest.mark.kde
def test_the_stack_serves_the_kde_portal_and_stops_clean() -> None:
    stack = started_stack()
    runtime = stack.runtime_dir
    try:
        assert runtime.stat().st_mode & 0o777 == 0o700
        with open_dbus_connection(stack.bus_address) as connection:
            assert remote_desktop_version(connection, 10.0) == 1  # xdg-desktop-portal 1.16
        portal = open_portal(stack)  # the portal starts its backends for the first session
        try:
            assert portal.streams[0].size == stack.output_size  # the one output, at the asked size
        finally:
            portal.close()
        names = _bus_names(stack.bus_address)
        # The KDE backend serves the session (XDG_CURRENT_DESKTOP=KDE), and KWin is the compositor.
        assert "org.freedesktop.impl.portal.desktop.kde" in names, names
        assert "org.kde.KWin" in names, names
        assert {line.split()[1] for line in _processes_with(runtime)} >= {"kwin_wayland", "xdg-desktop-por"}
    finally:
        stack.stop()
    assert _processes_with(runtime) == [], "processes of the stack still run after stop()"
    assert not stack.root.exists()
