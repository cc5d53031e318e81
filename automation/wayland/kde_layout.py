"""Which keyboard layout is active on KDE Plasma, asked of KWin over D-Bus.

KDE's portal (xdg-desktop-portal-kde 5.27) types a NotifyKeyboardKeysym by looking the keysym up in
its own keyboard state, which never leaves the keymap's first layout (the portal is never the
focused client, so KWin never tells it of a switch): with `us,ru` and Russian active, "," sent by
keysym lands on the key us has it on, which types "б". A NotifyKeyboardKeycode goes through KWin's
own keyboard state instead, so it types what the active layout has on that key, as a user's key
press does. Wayland tells the active layout only to the focused client; KWin tells anyone on the
session bus: org.kde.keyboard, /Layouts, org.kde.KeyboardLayouts, `getLayout` (an index into
`getLayoutsList`, in the order of the layouts of the keymap KWin gives its clients).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jeepney import DBusAddress, HeaderFields, MessageType, new_method_call
from jeepney.io.blocking import DBusConnection, open_dbus_connection

from holodesk.automation.backends import wayland_desktop
from holodesk.automation.errors import ExecutionError

KWIN_LAYOUTS = DBusAddress("/Layouts", bus_name="org.kde.keyboard", interface="org.kde.KeyboardLayouts")


class LayoutUnknown(ExecutionError):
    """KWin did not say which keyboard layout is active (the message says why)."""


@dataclass(frozen=True, slots=True)
class ActiveLayout:
    """The active layout's index (from 0) among KWin's layouts, and their short names ("us", "ru")."""

    index: int
    names: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.names[self.index]


def is_kde(environ: Mapping[str, str]) -> bool:
    """The desktop is KDE Plasma: XDG_CURRENT_DESKTOP names it first, as backends.choose_backend reads it."""
    return wayland_desktop(environ).lower() == "kde"


def kwin_active_layout(bus_address: str = "SESSION", timeout_s: float = 2.0) -> ActiveLayout:
    """The layout KWin has active now; LayoutUnknown when it cannot be asked or its answer makes no sense."""
    try:
        connection = open_dbus_connection(bus=bus_address)
    except (OSError, KeyError, ValueError) as exc:
        raise LayoutUnknown(f"cannot connect to the D-Bus session bus: {exc}") from exc
    with connection:
        index = _call(connection, "getLayout", timeout_s)
        layouts = _call(connection, "getLayoutsList", timeout_s)
    if not isinstance(index, int) or not isinstance(layouts, list):
        raise LayoutUnknown(f"KWin's keyboard service answered {index!r} and {layouts!r}, not a layout index and list")
    names = tuple(str(entry[0]) for entry in layouts)
    if not 0 <= index < len(names):
        raise LayoutUnknown(f"KWin says layout {index} is active, but it has {len(names)} layout(s): {names}")
    return ActiveLayout(index, names)


def _call(connection: DBusConnection, method: str, timeout_s: float) -> object:
    try:
        reply = connection.send_and_get_reply(new_method_call(KWIN_LAYOUTS, method), timeout=timeout_s)
    except TimeoutError as exc:
        raise LayoutUnknown(
            f"KWin's keyboard service (org.kde.keyboard) did not answer within {timeout_s:g} s"
        ) from exc
    if reply.header.message_type == MessageType.error:
        name = reply.header.fields.get(HeaderFields.error_name, "an error")
        raise LayoutUnknown(f"KWin's keyboard service (org.kde.keyboard) answered {method} with {name}")
    return reply.body[0] if reply.body else None
