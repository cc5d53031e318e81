"""Global shortcuts on Wayland through the xdg-desktop-portal GlobalShortcuts interface (jeepney, threads).

Wayland gives no application the whole keyboard. Where the desktop's portal offers GlobalShortcuts
(KDE Plasma; GNOME from 48), an application creates a session, asks the desktop to bind its
shortcuts (the desktop may show a dialog and may bind other keys than the ones preferred, or none)
and hears each press as the portal's `Activated` signal. Elsewhere `probe_global_shortcuts` says why
not, in words, so the caller can fall back to a desktop shortcut that runs `holodesk trigger`.

One D-Bus connection per session, run by jeepney's threaded router: it must stay open for the
session to live (the portal ends a session whose owner left), and recent portals send `Activated`
only to that connection. A dispatch thread of ours hands each activation to the callback. Every
call is bounded; refusals and faults become `PortalError`s that say what happened.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jeepney import DBusAddress, HeaderFields, MatchRule, Message, MessageType, Properties, message_bus, new_method_call
from jeepney.io.common import RouterClosed
from jeepney.io.threading import DBusRouter, open_dbus_connection

from holodesk.automation.wayland.portal import (
    PORTAL_BUS_NAME,
    PORTAL_PATH,
    ConsentRefused,
    PortalError,
    error_reply,
    new_request,
    response_results,
    sender_name,
)

GLOBAL_SHORTCUTS = "org.freedesktop.portal.GlobalShortcuts"
PROMPT_SHORTCUT = "prompt"
STOP_SHORTCUT = "stop"

# D-Bus errors that mean "nothing answers for this name" or "this object has no such interface".
_NO_PORTAL_ERRORS = ("org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner")
_NO_INTERFACE_ERRORS = (
    "org.freedesktop.DBus.Error.InvalidArgs",  # GDBus: "No such interface ... on object"
    "org.freedesktop.DBus.Error.UnknownInterface",
    "org.freedesktop.DBus.Error.UnknownProperty",
)

NO_PORTAL_WORDS = "the desktop portal (xdg-desktop-portal) is not running on this session's D-Bus"
NO_INTERFACE_WORDS = (
    "this desktop's portal offers no GlobalShortcuts interface (GNOME before 48 and most wlroots "
    "desktops such as sway do not; KDE Plasma does)"
)

# pynput hotkey names -> the XDG "shortcuts" specification's modifier and key names.
_MODIFIERS = {"ctrl": "CTRL", "alt": "ALT", "shift": "SHIFT", "cmd": "LOGO", "super": "LOGO"}
_KEYS = {
    "esc": "Escape", "enter": "Return", "space": "space", "tab": "Tab", "backspace": "BackSpace",
    "delete": "Delete", "home": "Home", "end": "End", "page_up": "Page_Up", "page_down": "Page_Down",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right", "insert": "Insert", "pause": "Pause",
}  # fmt: skip


class ShortcutsUnavailable(PortalError):
    """No GlobalShortcuts here: no portal, or a portal without that interface. The message says which."""


@dataclass(frozen=True, slots=True)
class ShortcutRequest:
    """A shortcut to ask the desktop for: an id, what it does in words, and the keys we would like."""

    id: str
    description: str
    preferred_trigger: str | None = None


@dataclass(frozen=True, slots=True)
class BoundShortcut:
    """A shortcut as the desktop reports it; `trigger` is the desktop's own words for its keys ("" if none)."""

    id: str
    description: str
    trigger: str

    def in_words(self) -> str:
        keys = self.trigger or "no keys assigned yet (set them in the desktop's shortcut settings)"
        return f"{self.description}: {keys}"


def preferred_trigger(pynput_hotkey: str) -> str | None:
    """'<ctrl>+<alt>+h' (pynput syntax) -> 'CTRL+ALT+h' (XDG shortcuts syntax); None when it has no such form."""
    parts = [part.strip() for part in pynput_hotkey.split("+")]
    if not parts or any(not part for part in parts):
        return None
    names: list[str] = []
    for part in parts[:-1]:
        modifier = _MODIFIERS.get(part.strip("<>").removesuffix("_l").removesuffix("_r"))
        if modifier is None:
            return None
        names.append(modifier)
    key = parts[-1]
    if key.startswith("<") and key.endswith(">"):
        name = key[1:-1]
        if name in _KEYS:
            key = _KEYS[name]
        elif name[:1] == "f" and name[1:].isdigit():
            key = name.upper()
        else:
            return None
    elif len(key) != 1 or not key.isprintable():
        return None
    return "+".join([*names, key])


def parse_shortcuts(raw: Any) -> tuple[BoundShortcut, ...]:
    """The `shortcuts` result, a(sa{sv}), as BoundShortcuts (entries without an id are dropped)."""
    bound: list[BoundShortcut] = []
    for entry in _variant(raw) or ():
        shortcut_id, props = entry
        fields = {key: _variant(value) for key, value in dict(props).items()}
        if not shortcut_id:
            continue
        bound.append(
            BoundShortcut(
                str(shortcut_id),
                str(fields.get("description") or shortcut_id),
                str(fields.get("trigger_description") or ""),
            )
        )
    return tuple(bound)


class GlobalShortcutsSession:
    """A GlobalShortcuts portal session with its shortcuts bound. Use `open`; end it with `close`.

    `on_activated(shortcut_id)` runs on the session's dispatch thread, once per press.
    """

    def __init__(
        self,
        router: DBusRouter,
        session_handle: str,
        bound: tuple[BoundShortcut, ...],
        on_activated: Callable[[str], None],
        timeout_s: float,
    ) -> None:
        self._router = router
        self.session_handle = session_handle
        self.bound = bound
        self._on_activated = on_activated
        self._timeout_s = timeout_s
        self._closed = threading.Event()
        self._activations: queue.Queue[Message] = queue.Queue(maxsize=64)
        rule = MatchRule(type="signal", interface=GLOBAL_SHORTCUTS, member="Activated", path=PORTAL_PATH)
        self._filter = router.filter(rule, queue=self._activations)
        _call(router, message_bus.AddMatch(rule), timeout_s, "subscribing to shortcut presses")
        self._dispatcher = threading.Thread(target=self._dispatch, name="holodesk-shortcuts", daemon=True)
        self._dispatcher.start()

    @classmethod
    def open(
        cls,
        shortcuts: Sequence[ShortcutRequest],
        on_activated: Callable[[str], None],
        *,
        bus_address: str = "SESSION",
        timeout_s: float = 5.0,
        dialog_timeout_s: float = 300.0,
    ) -> GlobalShortcutsSession:
        """Create a session and bind `shortcuts`; blocks while the desktop shows its dialog (if any).

        `dialog_timeout_s` bounds the wait for BindShortcuts' answer, `timeout_s` every other call.
        Raises ShortcutsUnavailable (no portal / no interface), ConsentRefused (the user cancelled
        the dialog), PortalError for any other failure.
        """
        if not shortcuts:
            raise ValueError("no shortcuts to bind")
        ids = [shortcut.id for shortcut in shortcuts]
        if len(set(ids)) != len(ids):
            raise ValueError(f"shortcut ids must be unique, got {ids}")
        router = _open_router(bus_address)
        try:
            global_shortcuts_version(router, timeout_s)
            requests = _Requests(router, timeout_s)
            wanted = ("a(sa{sv})", [_shortcut_entry(shortcut) for shortcut in shortcuts])
            # KDE Plasma 5.27 binds the shortcuts given to CreateSession (an early draft of the
            # interface); later backends ignore the extra option and bind through BindShortcuts.
            created = requests.call("CreateSession", "a{sv}", {"shortcuts": wanted}, session=True)
            session_handle = str(_variant(created.get("session_handle", "")))
            if not session_handle:
                raise PortalError(f"GlobalShortcuts.CreateSession returned no session handle: {created!r}")
            try:
                results = requests.call(
                    "BindShortcuts",
                    "oa(sa{sv})sa{sv}",
                    {},
                    session_handle,
                    wanted[1],
                    "",
                    timeout_s=dialog_timeout_s,
                )
            except ConsentRefused:
                raise ConsentRefused(
                    "you declined the desktop's request to bind Holodesk's shortcuts; "
                    "they stay unbound until Holodesk starts again"
                ) from None
            bound = parse_shortcuts(results.get("shortcuts"))
            session = cls(router, session_handle, bound, on_activated, timeout_s)
        except BaseException:  # the router closes on any way out; re-raised
            _close_router(router)
            raise
        return session

    def list_shortcuts(self) -> tuple[BoundShortcut, ...]:
        """What the desktop has bound for this session now (the user may have changed it since)."""
        if self._closed.is_set():
            raise PortalError("the global shortcuts session is closed")
        results = _Requests(self._router, self._timeout_s).call("ListShortcuts", "oa{sv}", {}, self.session_handle)
        return parse_shortcuts(results.get("shortcuts"))

    def unbound(self, wanted: Sequence[str]) -> list[str]:
        """The ids in `wanted` that the desktop did not bind to any keys."""
        triggers = {shortcut.id: shortcut.trigger for shortcut in self.bound}
        return [shortcut_id for shortcut_id in wanted if not triggers.get(shortcut_id)]

    def close(self) -> None:
        """End the session (the desktop releases the keys) and the connection. Safe to call twice."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._filter.close()
        session = DBusAddress(self.session_handle, bus_name=PORTAL_BUS_NAME, interface="org.freedesktop.portal.Session")
        try:
            self._router.send_and_get_reply(new_method_call(session, "Close"), timeout=self._timeout_s)
        except (TimeoutError, OSError, RouterClosed):
            pass  # the portal may be gone; the connection's end closes the session as well
        finally:
            _close_router(self._router)
        self._dispatcher.join(timeout=2.0)

    def _dispatch(self) -> None:
        while not self._closed.is_set():
            try:
                signal = self._activations.get(timeout=0.2)
            except queue.Empty:
                continue
            session_handle, shortcut_id = signal.body[0], signal.body[1]
            # Portal 1.16 broadcasts every session's presses; only ours count.
            if session_handle != self.session_handle or self._closed.is_set():
                continue
            try:
                self._on_activated(str(shortcut_id))
            except Exception:  # a failing callback must not end the dispatch thread
                import logging

                logging.getLogger(__name__).exception("the shortcut callback failed")


def probe_global_shortcuts(bus_address: str = "SESSION", timeout_s: float = 5.0) -> int:
    """The portal's GlobalShortcuts version, asked without a session (nothing shows on screen).

    ShortcutsUnavailable, with the reason in words, when there is none.
    """
    router = _open_router(bus_address)
    try:
        return global_shortcuts_version(router, timeout_s)
    finally:
        _close_router(router)


def global_shortcuts_version(router: DBusRouter, timeout_s: float) -> int:
    """The GlobalShortcuts interface version (1 on portal 1.16); ShortcutsUnavailable when missing."""
    address = DBusAddress(PORTAL_PATH, bus_name=PORTAL_BUS_NAME, interface=GLOBAL_SHORTCUTS)
    reply = _call(router, Properties(address).get("version"), timeout_s, "asking the portal for GlobalShortcuts")
    if reply.header.message_type == MessageType.error:
        name = str(reply.header.fields.get(HeaderFields.error_name, "error"))
        if name in _NO_PORTAL_ERRORS:
            raise ShortcutsUnavailable(NO_PORTAL_WORDS)
        if name in _NO_INTERFACE_ERRORS:
            raise ShortcutsUnavailable(NO_INTERFACE_WORDS)
        raise ShortcutsUnavailable(f"the desktop portal answered {name}: {_first(reply.body)}")
    return int(_variant(reply.body[0]))


class _Requests:
    """GlobalShortcuts methods that answer through a Request object's Response signal."""

    def __init__(self, router: DBusRouter, timeout_s: float) -> None:
        self._router = router
        self._timeout_s = timeout_s
        self._sender = sender_name(router.unique_name)

    def call(
        self,
        method: str,
        signature: str,
        options: Mapping[str, tuple[str, Any]],
        *leading: Any,
        session: bool = False,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Call `method(*leading, options)` and return its Response's results (raises on refusal)."""
        request = new_request(self._sender, options, session)
        _call(self._router, message_bus.AddMatch(request.response_rule), self._timeout_s, f"preparing {method}")
        address = DBusAddress(PORTAL_PATH, bus_name=PORTAL_BUS_NAME, interface=GLOBAL_SHORTCUTS)
        # Subscribe before calling: the Response may arrive before the method's own reply.
        with self._router.filter(request.response_rule) as responses:
            reply = _call(
                self._router,
                new_method_call(address, method, signature, (*leading, request.options)),
                self._timeout_s,
                f"GlobalShortcuts.{method}",
            )
            failure = error_reply(reply, f"GlobalShortcuts.{method}")
            if failure is not None:
                raise failure
            wait = self._timeout_s if timeout_s is None else timeout_s
            try:
                signal = responses.get(timeout=wait)
            except queue.Empty:
                raise PortalError(f"the desktop gave no answer to GlobalShortcuts.{method} within {wait:g} s") from None
        return response_results(signal, f"GlobalShortcuts.{method}")


def _shortcut_entry(shortcut: ShortcutRequest) -> tuple[str, dict[str, tuple[str, str]]]:
    props = {"description": ("s", shortcut.description)}
    if shortcut.preferred_trigger:
        props["preferred_trigger"] = ("s", shortcut.preferred_trigger)
    return (shortcut.id, props)


def _open_router(bus_address: str) -> DBusRouter:
    try:
        connection = open_dbus_connection(bus=bus_address)
    except (OSError, KeyError, ValueError) as exc:
        raise ShortcutsUnavailable(f"cannot connect to the D-Bus session bus: {exc}") from exc
    return DBusRouter(connection)


def _close_router(router: DBusRouter) -> None:
    router.close()
    router.conn.close()


def _call(router: DBusRouter, message: Message, timeout_s: float, what: str) -> Message:
    """Send a method call and return its reply (an error reply included), bounded by `timeout_s`."""
    try:
        return router.send_and_get_reply(message, timeout=timeout_s)
    except TimeoutError as exc:
        raise PortalError(
            f"no answer from the desktop portal within {timeout_s:g} s ({what}); "
            "is xdg-desktop-portal running with a backend for this desktop?"
        ) from exc
    except (OSError, RouterClosed) as exc:  # the connection dropped
        raise PortalError(f"the D-Bus connection failed while {what}: {exc}") from exc


def _variant(value: Any) -> Any:
    """The value of a jeepney variant (signature, value), or the value itself."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return value[1]
    return value


def _first(body: Sequence[Any]) -> str:
    return str(body[0]) if body else ""
