"""A test-only portal backend for org.freedesktop.impl.portal.GlobalShortcuts, run as its own process.

No backend on this machine implements GlobalShortcuts (GNOME's 43 does not; KDE's needs KWin and
KGlobalAccel), so the real xdg-desktop-portal 1.16 frontend is routed here by a .portal file
(tests/support/shortcuts_portal.py). It behaves as the interface's documentation and KDE's backend
(5.27, src/globalshortcuts.cpp) do:

- CreateSession answers 0 with the session's `shortcuts` (the 1.16 frontend reads that key), and
  binds the `shortcuts` option if given, as KDE 5.27 does;
- BindShortcuts and ListShortcuts answer 2 for a session they do not know (as KDE), BindShortcuts
  answers 1 when the "user" cancels (mode "refuse": the dialog of GNOME 48 / Plasma 6 allows it);
- a shortcut without an id or description is skipped (KDE); a preferred trigger that does not
  parse, or whose keys another session holds, leaves the shortcut without keys (KGlobalAccel refuses
  a taken key); `trigger_description` reads like KDE's ("Ctrl+Alt+H");
- the session object's Close (org.freedesktop.impl.portal.Session) forgets the session.

The test's hand on it is org.holodesk.test.ShortcutsControl at /org/holodesk/test: Press(trigger)
emits Activated then Deactivated for every session shortcut bound to those keys and returns how many;
Assign(id, keys) is the user setting keys in the desktop's settings (ShortcutsChanged follows);
SetMode("bind" | "refuse"); Sessions() lists the open session handles. Prints "ready" once its
name is owned. Run: `python -m tests.support.shortcuts_backend` with DBUS_SESSION_BUS_ADDRESS set.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from jeepney import DBusAddress, HeaderFields, Message, MessageType, new_error, new_method_return, new_signal
from jeepney.bus_messages import DBus
from jeepney.io.blocking import DBusConnection, open_dbus_connection

BUS_NAME = "org.freedesktop.impl.portal.desktop.holodesktest"
PORTAL_PATH = "/org/freedesktop/portal/desktop"
IMPL_INTERFACE = "org.freedesktop.impl.portal.GlobalShortcuts"
SESSION_INTERFACE = "org.freedesktop.impl.portal.Session"
CONTROL_PATH = "/org/holodesk/test"
CONTROL_INTERFACE = "org.holodesk.test.ShortcutsControl"
PROPERTIES = "org.freedesktop.DBus.Properties"

SUCCESS, CANCELLED, OTHER = 0, 1, 2
MODIFIERS = {"CTRL": "Ctrl", "ALT": "Alt", "SHIFT": "Shift", "LOGO": "Meta", "NUM": "Num"}


@dataclass
class Shortcut:
    description: str
    trigger: str = ""  # canonical XDG form ("CTRL+ALT+h"), "" when no keys are assigned


@dataclass
class Session:
    shortcuts: dict[str, Shortcut] = field(default_factory=dict)


def canonical_trigger(text: str) -> str | None:
    """'ctrl+alt+H' -> 'CTRL+ALT+h'; None when it does not parse as XDG shortcut keys."""
    parts = [part.strip() for part in text.split("+")]
    if not parts or not all(parts):
        return None
    modifiers = [part.upper() for part in parts[:-1]]
    if any(modifier not in MODIFIERS for modifier in modifiers) or len(set(modifiers)) != len(modifiers):
        return None
    key = parts[-1]
    if key.upper() in MODIFIERS:
        return None
    return "+".join([*sorted(modifiers, key=list(MODIFIERS).index), key.lower() if len(key) == 1 else key])


def trigger_words(trigger: str) -> str:
    """KDE-like words for the keys: 'CTRL+ALT+h' -> 'Ctrl+Alt+H'."""
    if not trigger:
        return ""
    *modifiers, key = trigger.split("+")
    return "+".join([*(MODIFIERS[m] for m in modifiers), key.upper() if len(key) == 1 else key])


class Backend:
    def __init__(self, connection: DBusConnection) -> None:
        self.connection = connection
        self.sessions: dict[str, Session] = {}
        self.mode = "bind"

    # -- the portal interface ----------------------------------------------------------------------

    def create_session(self, handle: str, session_handle: str, app_id: str, options: dict[str, Any]) -> tuple:
        session = self.sessions.setdefault(session_handle, Session())
        if "shortcuts" in options:  # KDE 5.27 binds at creation
            self._bind(session_handle, session, options["shortcuts"][1])
        return SUCCESS, {"shortcuts": ("a(sa{sv})", self._described(session))}

    def bind_shortcuts(self, handle: str, session_handle: str, shortcuts: list, parent: str, options: dict) -> tuple:
        session = self.sessions.get(session_handle)
        if session is None:
            return OTHER, {}
        if self.mode == "refuse":
            return CANCELLED, {}
        self._bind(session_handle, session, shortcuts)
        return SUCCESS, {"shortcuts": ("a(sa{sv})", self._described(session))}

    def list_shortcuts(self, handle: str, session_handle: str) -> tuple:
        session = self.sessions.get(session_handle)
        if session is None:
            return OTHER, {}
        return SUCCESS, {"shortcuts": ("a(sa{sv})", self._described(session))}

    def _bind(self, session_handle: str, session: Session, shortcuts: list) -> None:
        for shortcut_id, props in shortcuts:
            description = props.get("description", ("s", ""))[1]
            if not shortcut_id or not description:
                print(f"skipped shortcut without id or description: {shortcut_id!r}", file=sys.stderr, flush=True)
                continue
            preferred = canonical_trigger(props.get("preferred_trigger", ("s", ""))[1] or "")
            if preferred and self._holder(preferred) not in (None, (session_handle, shortcut_id)):
                preferred = None  # another session holds these keys
            current = session.shortcuts.get(shortcut_id)
            trigger = current.trigger if current and current.trigger else (preferred or "")
            session.shortcuts[shortcut_id] = Shortcut(description, trigger)

    def _holder(self, trigger: str) -> tuple[str, str] | None:
        for handle, session in self.sessions.items():
            for shortcut_id, shortcut in session.shortcuts.items():
                if shortcut.trigger == trigger:
                    return handle, shortcut_id
        return None

    @staticmethod
    def _described(session: Session) -> list:
        return [
            (
                shortcut_id,
                {"description": ("s", s.description), "trigger_description": ("s", trigger_words(s.trigger))},
            )
            for shortcut_id, s in session.shortcuts.items()
        ]

    # -- the test's controls -----------------------------------------------------------------------

    def press(self, keys: str) -> int:
        trigger = canonical_trigger(keys)
        pressed = [
            (handle, shortcut_id)
            for handle, session in self.sessions.items()
            for shortcut_id, shortcut in session.shortcuts.items()
            if trigger and shortcut.trigger == trigger
        ]
        emitter = DBusAddress(PORTAL_PATH, interface=IMPL_INTERFACE)
        timestamp = int(time.time() * 1_000_000)
        for member in ("Activated", "Deactivated"):
            for handle, shortcut_id in pressed:
                body = (handle, shortcut_id, timestamp, {})
                self.connection.send(new_signal(emitter, member, "osta{sv}", body))
        return len(pressed)

    def assign(self, shortcut_id: str, keys: str) -> int:
        """The user sets keys for a shortcut in the desktop's settings: every session's shortcut of that id."""
        trigger = canonical_trigger(keys) or ""
        emitter = DBusAddress(PORTAL_PATH, interface=IMPL_INTERFACE)
        changed = 0
        for handle, session in self.sessions.items():
            if shortcut_id in session.shortcuts:
                session.shortcuts[shortcut_id].trigger = trigger
                changed += 1
                body = (handle, self._described(session))
                self.connection.send(new_signal(emitter, "ShortcutsChanged", "oa(sa{sv})", body))
        return changed

    # -- dispatch ----------------------------------------------------------------------------------

    def handle(self, message: Message) -> None:
        header = message.header
        if header.message_type != MessageType.method_call:
            return
        path = header.fields.get(HeaderFields.path)
        interface = header.fields.get(HeaderFields.interface)
        member = header.fields.get(HeaderFields.member)
        body = message.body
        reply: Message
        if path == PORTAL_PATH and interface == IMPL_INTERFACE and member == "CreateSession":
            reply = new_method_return(message, "ua{sv}", self.create_session(*body))
        elif path == PORTAL_PATH and interface == IMPL_INTERFACE and member == "BindShortcuts":
            reply = new_method_return(message, "ua{sv}", self.bind_shortcuts(*body))
        elif path == PORTAL_PATH and interface == IMPL_INTERFACE and member == "ListShortcuts":
            reply = new_method_return(message, "ua{sv}", self.list_shortcuts(*body))
        elif path == PORTAL_PATH and interface == PROPERTIES and member == "GetAll":
            props = {"version": ("u", 1)} if body[0] == IMPL_INTERFACE else {}
            reply = new_method_return(message, "a{sv}", (props,))
        elif (
            path == PORTAL_PATH
            and interface == PROPERTIES
            and member == "Get"
            and tuple(body)
            == (
                IMPL_INTERFACE,
                "version",
            )
        ):
            reply = new_method_return(message, "v", (("u", 1),))
        elif path in self.sessions and interface == SESSION_INTERFACE and member == "Close":
            del self.sessions[path]
            reply = new_method_return(message)
        elif path == CONTROL_PATH and interface == CONTROL_INTERFACE and member == "Press":
            reply = new_method_return(message, "u", (self.press(body[0]),))
        elif path == CONTROL_PATH and interface == CONTROL_INTERFACE and member == "Assign":
            reply = new_method_return(message, "u", (self.assign(*body),))
        elif path == CONTROL_PATH and interface == CONTROL_INTERFACE and member == "SetMode":
            if body[0] not in ("bind", "refuse"):
                reply = new_error(message, "org.freedesktop.DBus.Error.InvalidArgs", "s", (f"mode {body[0]!r}",))
            else:
                self.mode = body[0]
                reply = new_method_return(message)
        elif path == CONTROL_PATH and interface == CONTROL_INTERFACE and member == "Sessions":
            reply = new_method_return(message, "as", (sorted(self.sessions),))
        else:
            reply = new_error(
                message, "org.freedesktop.DBus.Error.UnknownMethod", "s", (f"no {interface}.{member} on {path}",)
            )
        self.connection.send(reply)


def main() -> None:
    connection = open_dbus_connection(bus="SESSION")
    reply = connection.send_and_get_reply(DBus().RequestName(BUS_NAME, 4), timeout=10)  # 4: do not queue
    if reply.body[0] != 1:
        sys.exit(f"could not own {BUS_NAME} (RequestName answered {reply.body[0]})")
    backend = Backend(connection)
    print("ready", flush=True)
    while True:
        backend.handle(connection.receive())


if __name__ == "__main__":
    main()
