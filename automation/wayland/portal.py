"""One xdg-desktop-portal RemoteDesktop + ScreenCast session over D-Bus (jeepney, blocking I/O).

The portal answers each request asynchronously: a method returns a Request object path and the
result arrives later as that Request's `Response` signal. `PortalSession.open` subscribes to the
Response before calling, waits a bounded time for it, and turns "the user cancelled" into
`ConsentRefused`. Input goes through the RemoteDesktop `Notify*` methods; the PipeWire remote is
handed over as a file descriptor. Every call is bounded by a timeout; one lock serialises the
connection, which jeepney's blocking API does not share between threads.
"""

from __future__ import annotations

import secrets
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jeepney import DBusAddress, HeaderFields, MatchRule, Message, MessageType, Properties, message_bus, new_method_call
from jeepney.io.blocking import DBusConnection, open_dbus_connection
from jeepney.wrappers import DBusErrorResponse

from holodesk.automation.errors import AutomationError

PORTAL_BUS_NAME = "org.freedesktop.portal.Desktop"
PORTAL_PATH = "/org/freedesktop/portal/desktop"
REMOTE_DESKTOP = "org.freedesktop.portal.RemoteDesktop"
SCREEN_CAST = "org.freedesktop.portal.ScreenCast"

# Device types (RemoteDesktop.SelectDevices) and source types (ScreenCast.SelectSources).
DEVICE_KEYBOARD = 1
DEVICE_POINTER = 2
SOURCE_MONITOR = 1
# Persist the ScreenCast permission until the user revokes it (portal persist_mode 2).
PERSIST_UNTIL_REVOKED = 2
# Cursor modes: 1 hidden, 2 embedded in the frames. The model sees the pointer as a user would.
CURSOR_EMBEDDED = 2

# Response codes of org.freedesktop.portal.Request.Response.
RESPONSE_SUCCESS = 0
RESPONSE_CANCELLED = 1

# Key and button states of the Notify methods.
RELEASED = 0
PRESSED = 1


class PortalError(AutomationError):
    """The portal is missing, failed, or answered something unusable."""


class ConsentRefused(PortalError):
    """The user closed or cancelled the desktop's permission dialog."""


SHARING_STOPPED = "screen sharing was stopped from the desktop: start the task again to share"


class SharingStopped(PortalError):
    """The desktop ended the session (Session.Closed): the user stopped sharing, or the compositor did."""


@dataclass(frozen=True, slots=True)
class PortalStream:
    """One ScreenCast stream: its PipeWire node and where it sits, in logical desktop pixels."""

    node_id: int
    position: tuple[int, int]
    size: tuple[int, int]


@dataclass(frozen=True, slots=True)
class StartResult:
    """What RemoteDesktop.Start granted."""

    devices: int
    streams: tuple[PortalStream, ...]
    restore_token: str | None


def _variant(value: Any) -> Any:
    """The value of a jeepney variant (signature, value), or the value itself."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return value[1]
    return value


def select_devices_options(version: int, restore_token: str | None) -> dict[str, tuple[str, Any]]:
    """RemoteDesktop.SelectDevices options for a portal of this RemoteDesktop `version`.

    Persistence belongs to SelectDevices from version 2 on; a version 1 portal (1.16, Debian 12)
    has no such option and refuses persist_mode on a remote-desktop session's SelectSources
    ("cannot persist"), so there it is never asked for and a stored token is not sent.
    """
    devices: dict[str, tuple[str, Any]] = {"types": ("u", DEVICE_KEYBOARD | DEVICE_POINTER)}
    if version >= 2:
        devices["persist_mode"] = ("u", PERSIST_UNTIL_REVOKED)
        if restore_token:
            devices["restore_token"] = ("s", restore_token)
    return devices


def parse_streams(raw: Any) -> tuple[PortalStream, ...]:
    """Streams from Start's `streams` result, a(ua{sv}); a stream without size is refused."""
    streams: list[PortalStream] = []
    for entry in _variant(raw) or ():
        node_id, props = entry
        props = {key: _variant(value) for key, value in dict(props).items()}
        size = props.get("size")
        if not size or len(size) != 2 or min(size) <= 0:
            raise PortalError(f"the portal's stream {node_id} has no usable size: {props!r}")
        position = props.get("position") or (0, 0)
        streams.append(PortalStream(int(node_id), (int(position[0]), int(position[1])), (int(size[0]), int(size[1]))))
    if not streams:
        raise PortalError("the portal started the session but shared no screen")
    return tuple(streams)


class PortalSession:
    """A started RemoteDesktop session with one shared screen set. Use `open`; close with `close`."""

    def __init__(self, connection: DBusConnection, session_handle: str, started: StartResult, timeout_s: float) -> None:
        self._connection = connection
        self.session_handle = session_handle
        self.devices = started.devices
        self.streams = started.streams
        self.restore_token = started.restore_token
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._closed = False
        self._stopped_by_desktop = False
        # The portal sends Session.Closed to this connection only; jeepney files it here whenever
        # the connection reads (any call, or `stopped_by_desktop`'s poll).
        self._closed_signals: deque[Any] = deque(maxlen=1)
        self._closed_filter = connection.filter(_closed_rule(session_handle), queue=self._closed_signals)

    @classmethod
    def open(
        cls,
        *,
        restore_token: str | None = None,
        timeout_s: float = 10.0,
        consent_timeout_s: float = 300.0,
        bus_address: str = "SESSION",
    ) -> PortalSession:
        """Create, configure and start a session; blocks while the desktop shows its dialog.

        `consent_timeout_s` bounds the wait for the user's answer; `timeout_s` every other call.
        Raises ConsentRefused when the user declines, PortalError for anything else.
        """
        try:
            connection = open_dbus_connection(bus=bus_address, enable_fds=True)
        except (OSError, KeyError, ValueError) as exc:
            raise PortalError(f"cannot connect to the D-Bus session bus: {exc}") from exc
        try:
            requests = _Requests(connection, timeout_s)
            created = requests.call(REMOTE_DESKTOP, "CreateSession", "a{sv}", {}, session=True)
            session_handle = str(_variant(created.get("session_handle", "")))
            if not session_handle:
                raise PortalError(f"RemoteDesktop.CreateSession returned no session handle: {created!r}")
            devices = select_devices_options(remote_desktop_version(connection, timeout_s), restore_token)
            requests.call(REMOTE_DESKTOP, "SelectDevices", "oa{sv}", devices, session_handle)
            sources: dict[str, tuple[str, Any]] = {
                "types": ("u", SOURCE_MONITOR),
                "multiple": ("b", True),
                "cursor_mode": ("u", CURSOR_EMBEDDED),
            }
            requests.call(SCREEN_CAST, "SelectSources", "oa{sv}", sources, session_handle)
            connection.send_and_get_reply(message_bus.AddMatch(_closed_rule(session_handle)), timeout=timeout_s)
            results = requests.call(
                REMOTE_DESKTOP, "Start", "osa{sv}", {}, session_handle, "", timeout_s=consent_timeout_s
            )
            token = _variant(results.get("restore_token"))
            started = StartResult(
                devices=int(_variant(results.get("devices", 0)) or 0),
                streams=parse_streams(results.get("streams")),
                restore_token=str(token) if token else None,
            )
        except BaseException:  # the D-Bus connection closes on any way out; re-raised
            connection.close()
            raise
        return cls(connection, session_handle, started, timeout_s)

    def stopped_by_desktop(self) -> bool:
        """True once the desktop has closed the session (read without blocking; sticky)."""
        with self._lock:
            if not self._stopped_by_desktop and not self._closed:
                self._read_pending()
            return self._stopped_by_desktop

    def _read_pending(self) -> None:
        """Read what the bus has already sent, so a Closed signal is seen (lock held)."""
        try:
            while not self._closed_signals:
                self._connection.recv_messages(timeout=0)
        except TimeoutError:
            pass  # nothing more waiting
        except OSError:
            self._stopped_by_desktop = True  # the bus connection itself is gone: so is the session
        if self._closed_signals:
            self._stopped_by_desktop = True

    @property
    def pointer_allowed(self) -> bool:
        return bool(self.devices & DEVICE_POINTER)

    @property
    def keyboard_allowed(self) -> bool:
        return bool(self.devices & DEVICE_KEYBOARD)

    def open_pipewire_remote(self) -> int:
        """A file descriptor for the PipeWire remote that carries this session's streams (caller owns it)."""
        body = self._call(SCREEN_CAST, "OpenPipeWireRemote", "oa{sv}", (self.session_handle, {}))
        fd = body[0]
        return int(fd.to_raw_fd()) if hasattr(fd, "to_raw_fd") else int(fd)

    def pointer_motion_absolute(self, stream: PortalStream, x: float, y: float) -> None:
        """Move the pointer to (x, y) in the stream's logical pixels."""
        self._call(
            REMOTE_DESKTOP,
            "NotifyPointerMotionAbsolute",
            "oa{sv}udd",
            (self.session_handle, {}, stream.node_id, float(x), float(y)),
        )

    def pointer_button(self, evdev_button: int, pressed: bool) -> None:
        self._call(
            REMOTE_DESKTOP,
            "NotifyPointerButton",
            "oa{sv}iu",
            (self.session_handle, {}, evdev_button, PRESSED if pressed else RELEASED),
        )

    def pointer_axis_discrete(self, axis: int, steps: int) -> None:
        """Scroll `steps` notches on `axis` (0 vertical, 1 horizontal); positive is down / right."""
        self._call(REMOTE_DESKTOP, "NotifyPointerAxisDiscrete", "oa{sv}ui", (self.session_handle, {}, axis, steps))

    def keyboard_keysym(self, keysym: int, pressed: bool) -> None:
        self._call(
            REMOTE_DESKTOP,
            "NotifyKeyboardKeysym",
            "oa{sv}iu",
            (self.session_handle, {}, keysym, PRESSED if pressed else RELEASED),
        )

    def keyboard_keycode(self, evdev_keycode: int, pressed: bool) -> None:
        """Press or release the physical key `evdev_keycode` (an XKB keycode less 8): whatever the
        active layout gives on it, as a user's key press does."""
        self._call(
            REMOTE_DESKTOP,
            "NotifyKeyboardKeycode",
            "oa{sv}iu",
            (self.session_handle, {}, evdev_keycode, PRESSED if pressed else RELEASED),
        )

    def close(self) -> None:
        """End the session (the desktop stops sharing) and the connection. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                session = DBusAddress(
                    self.session_handle, bus_name=PORTAL_BUS_NAME, interface="org.freedesktop.portal.Session"
                )
                self._connection.send_and_get_reply(new_method_call(session, "Close"), timeout=self._timeout_s)
            except (DBusErrorResponse, TimeoutError, OSError):
                pass  # the portal may already have closed it; the connection's end closes it too
            finally:
                self._connection.close()

    def _call(self, interface: str, method: str, signature: str, body: tuple[Any, ...]) -> tuple[Any, ...]:
        with self._lock:
            if self._closed:
                raise PortalError("the portal session is closed")
            self._read_pending()
            if self._stopped_by_desktop:
                raise SharingStopped(SHARING_STOPPED)
            address = DBusAddress(PORTAL_PATH, bus_name=PORTAL_BUS_NAME, interface=interface)
            try:
                reply = self._connection.send_and_get_reply(
                    new_method_call(address, method, signature, body), timeout=self._timeout_s
                )
            except TimeoutError as exc:
                raise PortalError(f"the portal did not answer {method} within {self._timeout_s:g} s") from exc
            except OSError as exc:
                raise PortalError(f"the D-Bus connection failed during {method}: {exc}") from exc
            if reply.header.message_type == MessageType.error:
                name = reply.header.fields.get(HeaderFields.error_name, "error")
                raise PortalError(f"{interface}.{method} failed: {name}: {reply.body[0] if reply.body else ''}")
            return tuple(reply.body)


def _closed_rule(session_handle: str) -> MatchRule:
    return MatchRule(type="signal", interface="org.freedesktop.portal.Session", member="Closed", path=session_handle)


@dataclass(frozen=True, slots=True)
class PortalRequest:
    """One call to a portal method that answers through a Request object: the options that name the
    Request (and the session, for CreateSession), and the rule that matches its Response signal."""

    options: dict[str, tuple[str, Any]]
    response_rule: MatchRule


def sender_name(unique_name: str | None) -> str:
    """The caller's part of a Request path: its unique bus name without ':' and with '_' for '.'."""
    sender = (unique_name or "").lstrip(":").replace(".", "_")
    if not sender:
        raise PortalError("the D-Bus connection has no unique name")
    return sender


def new_request(sender: str, options: Mapping[str, tuple[str, Any]], session: bool = False) -> PortalRequest:
    """Fresh tokens for one call: the Request's path is known before the call, so the caller can
    subscribe to its Response first (the Response may arrive before the method's own reply)."""
    token = "holodesk_" + secrets.token_hex(8)
    handle = f"{PORTAL_PATH}/request/{sender}/{token}"
    full_options: dict[str, tuple[str, Any]] = {"handle_token": ("s", token), **options}
    if session:
        full_options["session_handle_token"] = ("s", "holodesk_" + secrets.token_hex(8))
    rule = MatchRule(type="signal", interface="org.freedesktop.portal.Request", member="Response", path=handle)
    return PortalRequest(full_options, rule)


def error_reply(reply: Message, what: str) -> PortalError | None:
    """The PortalError for a D-Bus error reply to `what` (None for a normal reply)."""
    if reply.header.message_type != MessageType.error:
        return None
    name = reply.header.fields.get(HeaderFields.error_name, "error")
    detail = reply.body[0] if reply.body else ""
    return PortalError(f"{what} failed: {name}: {detail}")


def response_results(response: Message, method: str) -> dict[str, Any]:
    """A Response signal's results; ConsentRefused when the user cancelled, PortalError on failure."""
    code, results = response.body
    if code == RESPONSE_CANCELLED:
        raise ConsentRefused(f"the permission request ({method}) was refused or cancelled")
    if code != RESPONSE_SUCCESS:
        raise PortalError(f"the portal ended {method} with code {code} (the desktop refused or failed)")
    return dict(results)


class _Requests:
    """Calls portal methods that answer through a Request object's Response signal."""

    def __init__(self, connection: DBusConnection, timeout_s: float) -> None:
        self._connection = connection
        self._timeout_s = timeout_s
        self._sender = sender_name(connection.unique_name)

    def call(
        self,
        interface: str,
        method: str,
        signature: str,
        options: Mapping[str, tuple[str, Any]],
        *leading: Any,
        session: bool = False,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Call `method(*leading, options)` and return the Response's results (raises on refusal)."""
        request = new_request(self._sender, options, session)
        bus = self._connection
        bus.send_and_get_reply(message_bus.AddMatch(request.response_rule), timeout=self._timeout_s)
        address = DBusAddress(PORTAL_PATH, bus_name=PORTAL_BUS_NAME, interface=interface)
        with bus.filter(request.response_rule) as responses:
            try:
                reply = bus.send_and_get_reply(
                    new_method_call(address, method, signature, (*leading, request.options)), timeout=self._timeout_s
                )
            except TimeoutError as exc:
                raise PortalError(
                    f"the desktop portal did not answer {method} within {self._timeout_s:g} s "
                    "(is xdg-desktop-portal running with a backend for this desktop?)"
                ) from exc
            failure = error_reply(reply, f"{interface}.{method}")
            if failure is not None:
                raise failure
            wait = self._timeout_s if timeout_s is None else timeout_s
            try:
                signal = bus.recv_until_filtered(responses, timeout=wait)
            except TimeoutError as exc:
                raise PortalError(f"no answer to {method} within {wait:g} s") from exc
        return response_results(signal, method)


def remote_desktop_version(connection: DBusConnection, timeout_s: float) -> int:
    """The portal's RemoteDesktop interface version (1 on Debian 12's portal 1.16)."""
    address = DBusAddress(PORTAL_PATH, bus_name=PORTAL_BUS_NAME, interface=REMOTE_DESKTOP)
    try:
        reply = connection.send_and_get_reply(Properties(address).get("version"), timeout=timeout_s)
    except TimeoutError as exc:
        raise PortalError(f"the desktop portal did not answer within {timeout_s:g} s") from exc
    if reply.header.message_type == MessageType.error:
        name = reply.header.fields.get(HeaderFields.error_name, "error")
        raise PortalError(f"the desktop portal has no RemoteDesktop interface ({name}): is a backend installed?")
    return int(_variant(reply.body[0]))


def probe_remote_desktop(timeout_s: float = 5.0) -> int:
    """The portal's RemoteDesktop version, asked without starting a session (no dialog shows)."""
    try:
        connection = open_dbus_connection(bus="SESSION")
    except (OSError, KeyError, ValueError) as exc:
        raise PortalError(f"cannot connect to the D-Bus session bus: {exc}") from exc
    with connection:
        return remote_desktop_version(connection, timeout_s)
