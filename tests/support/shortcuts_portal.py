"""The headless GNOME stack with the real xdg-desktop-portal 1.16 routed to a test GlobalShortcuts backend.

Portal 1.16 reads its backends' .portal files from $XDG_DESKTOP_PORTAL_DIR when set (else from its
build-time data folder; it does not search XDG_DATA_DIRS) and exports GlobalShortcuts only when one
of them lists org.freedesktop.impl.portal.GlobalShortcuts. `ShortcutsStack` gives the portal (D-Bus
activated, so it inherits the bus's environment) GnomeStack's folder of GNOME's own .portal files
(bench/rigs/gnome_stack.own_portal_files) plus, when `global_shortcuts` is true, one for
tests/support/shortcuts_backend.py, which it starts once the bus is up. Without it the portal has no
GlobalShortcuts, as on GNOME 43 (with KDE's portal installed too, KDE's file is left out, or the portal
would hand GlobalShortcuts to it).

`press`, `set_mode` and `sessions` are the test's hand on that backend (its control interface).
"""

from __future__ import annotations

import os
from pathlib import Path

from jeepney import DBusAddress, MessageType, new_method_call
from jeepney.io.blocking import open_dbus_connection

from bench.rigs.gnome_stack import GnomeStack, StackError
from tests.support.line_process import LineProcess
from tests.support.shortcuts_backend import BUS_NAME, CONTROL_INTERFACE, CONTROL_PATH, IMPL_INTERFACE

TEST_PORTAL = f"""[portal]
DBusName={BUS_NAME}
Interfaces={IMPL_INTERFACE};
UseIn=gnome
"""


class ShortcutsStack(GnomeStack):
    """GnomeStack whose portal finds (or, with global_shortcuts=False, lacks) a GlobalShortcuts backend."""

    def __init__(self, *, global_shortcuts: bool = True, root: Path | None = None) -> None:
        super().__init__(root)
        self.global_shortcuts = global_shortcuts
        self.portal_dir = self.root / "portals"
        self.backend: LineProcess | None = None

    def start(self) -> ShortcutsStack:
        self.portal_dir.mkdir(parents=True, exist_ok=True)  # GnomeStack.start adds GNOME's own files
        if self.global_shortcuts:
            (self.portal_dir / "holodesk-test.portal").write_text(TEST_PORTAL, encoding="utf-8")
        super().start()
        if self.global_shortcuts:
            env = {**self.env(), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
            self.backend = LineProcess("tests.support.shortcuts_backend", env=env)
            if self.backend.next(20.0) != "ready":
                self.stop()
                raise StackError("the test GlobalShortcuts backend did not start" + self.log_tail())
        return self

    def stop(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None
        super().stop()

    # -- the test's hand on the backend -------------------------------------------------------------

    def press(self, keys: str) -> int:
        """Press these keys ("CTRL+ALT+h") on the desktop; how many bound shortcuts they activated."""
        return int(self._control("Press", "s", (keys,))[0])

    def assign(self, shortcut_id: str, keys: str) -> int:
        """The user gives `shortcut_id` these keys in the desktop's settings; how many sessions had it."""
        return int(self._control("Assign", "ss", (shortcut_id, keys))[0])

    def set_mode(self, mode: str) -> None:
        """ "bind", or "refuse" (the user cancels the next binding dialogs)."""
        self._control("SetMode", "s", (mode,))

    def sessions(self) -> list[str]:
        """The GlobalShortcuts sessions the backend holds open."""
        return list(self._control("Sessions", "", ())[0])

    def _control(self, method: str, signature: str, body: tuple[object, ...]) -> tuple[object, ...]:
        address = DBusAddress(CONTROL_PATH, bus_name=BUS_NAME, interface=CONTROL_INTERFACE)
        with open_dbus_connection(self.bus_address) as connection:
            reply = connection.send_and_get_reply(new_method_call(address, method, signature or None, body), timeout=5)
        if reply.header.message_type == MessageType.error:
            raise StackError(f"the test backend refused {method}: {reply.body}")
        return tuple(reply.body)
