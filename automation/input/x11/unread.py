"""Which programs may still read keys sent on spare keycodes the X11 typer bound, and asking them.

A key event carries a keycode; the program turns it into a character with the keymap it has when
it reads the event, not the one the key was sent with. A program that reads late (stopped, busy,
swapped out) therefore reads keys sent on a spare keycode with whatever that keycode carries by
then: nothing once the binding is cleared (xterm wrote `/   |   ""   \\` for `a/b > c | d 'e'` on
the ru layout), another character once it is replaced. So each binding remembers the windows that
were sent keys on it and have not shown since that they read them; it is cleared or replaced only
when none is left.

The proof is a _NET_WM_PING round trip. The keys' XTEST requests are synced first, so the server
has queued their events to the program before the ping, which comes on another connection later:
X delivers one client's events in order, and the toolkits handle them in order on one thread (Xlib
and Xt, GTK, Qt's xcb event queue, GLFW, winit), turning a key into a character when they handle
it. An answer to a ping sent after the keys therefore means every key was read with the bindings
they were sent with. A window that is gone reads nothing more (toolkits drop events for windows
they no longer know). A program that does not take pings (xterm) can never be shown to have read:
its keys' bindings stay until the typer's last moment, and the step says the text was sent but
could not be confirmed. How long to wait for an answer grows with the slowest answer the window
gave before (three times it, from the ping timeout up to a ceiling).

python-xlib is imported lazily, as in automation.input.x11.keyboard.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import Enum
from typing import Any

# Waiting for an answer: at least this long, at most the ceiling, else three times the slowest answer seen.
PING_TIMEOUT_S = 2.0
MAX_PING_WAIT_S = 10.0
_LATENCY_FACTOR = 3.0


class PingAnswer(Enum):
    ANSWERED = "answered"
    NOT_TAKEN = "not taken"  # the window does not list _NET_WM_PING in WM_PROTOCOLS
    SILENT = "silent"  # no answer in time: busy, stopped, or gone quiet
    GONE = "gone"  # the window no longer exists
    UNREACHABLE = "unreachable"  # no X connection could be opened


def ping_window(display_name: str | None, window_id: int, timeout_s: float) -> PingAnswer:
    """Send _NET_WM_PING to top-level `window_id` and wait up to `timeout_s` for its answer."""
    try:
        from Xlib import display as xdisplay
        from Xlib import error as xerror
    except ImportError:
        return PingAnswer.UNREACHABLE
    try:
        display = xdisplay.Display(display_name)
    except (xerror.DisplayError, OSError, KeyError):
        return PingAnswer.UNREACHABLE
    try:
        return _ping(display, display.create_resource_object("window", window_id), timeout_s)
    except xerror.XError:
        return PingAnswer.GONE
    finally:
        display.close()


def ping_focused_window(display_name: str | None, timeout_s: float) -> bool:
    """Send _NET_WM_PING to the focused top-level window; True once it answered within `timeout_s`.

    False when no focused window announces _NET_WM_PING in WM_PROTOCOLS, or none answered.
    """
    try:
        from Xlib import display as xdisplay
        from Xlib import error as xerror
    except ImportError:
        return False
    try:
        display = xdisplay.Display(display_name)
    except (xerror.DisplayError, OSError, KeyError):
        return False
    try:
        window = top_level_with_protocols(display, display.screen().root)
        return window is not None and _ping(display, window, timeout_s) is PingAnswer.ANSWERED
    except xerror.XError:
        return False
    finally:
        display.close()


def _ping(display: Any, window: Any, timeout_s: float) -> PingAnswer:
    """One ping on `display` (XError when the window is gone)."""
    from Xlib import X
    from Xlib.protocol import event

    ping = display.intern_atom("_NET_WM_PING")
    protocols = display.intern_atom("WM_PROTOCOLS")
    if ping not in (window.get_wm_protocols() or ()):
        return PingAnswer.NOT_TAKEN
    root = display.screen().root
    # The answer goes to the root window with a mask each toolkit chooses: Qt's is StructureNotify
    # (with SubstructureRedirect), which SubstructureNotify alone never heard (a 2 s wait each time).
    root.change_attributes(event_mask=X.SubstructureNotifyMask | X.StructureNotifyMask)
    stamp = int(time.monotonic() * 1000) & 0x7FFFFFFF
    message = event.ClientMessage(window=window, client_type=protocols, data=(32, [ping, stamp, window.id, 0, 0]))
    window.send_event(message, event_mask=0)
    display.sync()  # a BadWindow for a window destroyed meanwhile arrives here
    deadline = time.monotonic() + timeout_s
    while True:
        while display.pending_events():
            received = display.next_event()
            if (
                received.type == X.ClientMessage
                and received.client_type == protocols
                and received.data[1][0] == ping
                and received.data[1][1] == stamp
            ):
                return PingAnswer.ANSWERED
        left = deadline - time.monotonic()
        if left <= 0:
            return PingAnswer.SILENT
        select.select([display.fileno()], [], [], left)


def top_level_with_protocols(display: Any, root: Any) -> Any:
    """The focused window or its nearest ancestor with WM_PROTOCOLS (the top level), or None.

    When the focus follows the pointer, the first window with WM_PROTOCOLS under the pointer.
    """
    from Xlib import X

    window = display.get_input_focus().focus
    if window == X.PointerRoot or not hasattr(window, "id") or window.id == root.id:
        under = root.query_pointer().child
        window = under if hasattr(under, "id") and under.id else None
        if window is None:
            return None
        return first_below(window, lambda w: bool(w.get_wm_protocols()))
    for _ in range(32):
        if window.get_wm_protocols():
            return window
        parent = window.query_tree().parent
        if not hasattr(parent, "id") or not parent.id or parent.id == root.id:
            return None
        window = parent
    return None


def first_below(window: Any, wanted: Callable[[Any], bool], depth: int = 3) -> Any:
    """`window` or its first descendant (breadth first, `depth` levels) for which `wanted` is true, or None."""
    level = [window]
    for _ in range(depth + 1):
        following = []
        for candidate in level:
            if wanted(candidate):
                return candidate
            following.extend(candidate.query_tree().children)
        level = following
    return None


@dataclass(frozen=True, slots=True)
class Reader:
    """A top-level window keys were sent to: its id (0: no window with WM_PROTOCOLS had the focus) and
    its program's name in words (its WM_CLASS class)."""

    window: int
    program: str


def focused_reader(display: Any) -> Reader:
    """The top-level window keys sent now go to, named for the step's words."""
    window = top_level_with_protocols(display, display.screen().root)
    if window is None:
        return Reader(0, "the focused program")
    wm_class = window.get_wm_class()
    return Reader(int(window.id), str(wm_class[1]) if wm_class else "the focused program")


class UnreadKeys:
    """Bound keycodes -> the readers sent keys on them that have not shown they read them."""

    def __init__(self, display_name: str | None, ping_timeout_s: float = PING_TIMEOUT_S) -> None:
        self.display_name = display_name
        self.ping_timeout_s = ping_timeout_s
        self._readers: dict[int, set[Reader]] = {}
        self._slowest: dict[int, float] = {}  # window -> its slowest answer so far, in seconds

    def sent(self, reader: Reader, keycodes: Collection[int]) -> None:
        """`reader` was sent keys on the bound `keycodes`."""
        for keycode in keycodes:
            self._readers.setdefault(keycode, set()).add(reader)

    def forget(self, keycodes: Collection[int]) -> None:
        """Their bindings are gone (someone else remapped them): nothing to wait for on them."""
        for keycode in keycodes:
            self._readers.pop(keycode, None)

    def wait_s(self, window: int) -> float:
        """How long to wait for `window`'s answer: grows with the slowest it gave, within bounds."""
        return min(MAX_PING_WAIT_S, max(self.ping_timeout_s, _LATENCY_FACTOR * self._slowest.get(window, 0.0)))

    def confirm(self, reader: Reader) -> str:
        """Ask `reader` whether it read everything sent so far: "" when it showed it did (or is gone),
        else why it could not be confirmed, in words."""
        if reader.window == 0:
            return "no window with the keyboard focus takes _NET_WM_PING, so no program can show it read the keys"
        wait = self.wait_s(reader.window)
        started = time.monotonic()
        answer = ping_window(self.display_name, reader.window, wait)
        if answer is PingAnswer.ANSWERED:
            took = time.monotonic() - started
            self._slowest[reader.window] = max(self._slowest.get(reader.window, 0.0), took)
        if answer in (PingAnswer.ANSWERED, PingAnswer.GONE):
            for readers in self._readers.values():
                readers.discard(reader)
            return ""
        if answer is PingAnswer.NOT_TAKEN:
            return f"{reader.program} does not answer _NET_WM_PING, so that it read them cannot be known"
        if answer is PingAnswer.SILENT:
            return f"{reader.program} did not answer a _NET_WM_PING within {wait:g} s (busy or stopped)"
        return "the X display could not be reached to ask the program"

    def pending(self, keycodes: Collection[int]) -> set[int]:
        """Those of `keycodes` some reader may still read keys on, after asking each reader once."""
        for reader in {reader for keycode in keycodes for reader in self._readers.get(keycode, ())}:
            self.confirm(reader)
        return {keycode for keycode in keycodes if self._readers.get(keycode)}

    def readers(self, keycodes: Collection[int]) -> list[str]:
        """The programs that may still read keys on `keycodes`, by name, once each."""
        names = {reader.program for keycode in keycodes for reader in self._readers.get(keycode, ())}
        return sorted(names)
