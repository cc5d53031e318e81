"""The pointer on wlroots desktops (sway): one virtual pointer (wlr virtual-pointer protocol) kept open for the run.

Per-call tools do not serve here: each call's device is gone before the programs bind a pointer to
it (wlroots' example client clicked on headless sway with success and the window saw nothing). So
one device is made on first use, through pywayland (the protocol declared in
virtual_pointer_protocol.py), and kept until `close`.

Every event goes out with its frame and then a wl_display sync whose answer is awaited, bounded:
the compositor has then handled the event and sent what it makes to the windows, in order, before
the next one goes. One wait stays a fixed pause, because nothing this client can see says when it is
over: when the seat had no pointer before this device (a headless sway, or a desktop without a
mouse), the programs bind their pointers only after the seat announces one, and a motion sent
before that is not seen (`bind_settle_s`, once per device). The pauses between the clicks of a
double click and between a drag's steps are a person's pace, not waits for anything.

Points are screen pixels; sway's outputs (automation.wlroots.sway_outputs) are in its layout's
pixels, which are the same only at scale 1, so other scales are refused in words. An absolute
motion is a fraction of the layout's bounding box (coords.virtual_desktop), given as the pixel's own
corner: programs round positions, so the centre would land on the next pixel.

Nothing is left pressed: a button is released in `finally` when a drag is stopped or fails, and
`close` releases any still down before the device is destroyed (sway does not: a device destroyed,
or its process killed, with a button down leaves that button pressed in the seat until some device
releases it; seen on headless sway 1.7). For a run killed outright (kill -9) mid-drag, a pressed
button is named in a crash marker (automation/held_input.py, as on X11) from before its press until
after its release; the next start releases exactly those buttons through a new device
(automation/input/wlroots/release.py). Releasing every button blindly would be no fix: sway passes a
release of a button that is not down on to the window.

Measured on headless sway 1.7 (idle Qt window): a motion, its frame and the acknowledgement take
0.2 ms (median of 50; at most 4.5 ms); a first click sent with no settle at all landed 3 times in 3,
so `bind_settle_s` is margin for a busier program, once per device.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from holodesk.automation.actions import MouseButton, Point, ScrollDirection
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import Monitor, virtual_desktop
from holodesk.automation.errors import ActionError, DesktopRefused
from holodesk.automation.held_input import HeldInputMarker, MarkerUnavailable
from holodesk.automation.input.primitives import drag_path
from holodesk.automation.input.wlroots.wayland_link import await_seat_capability, display_name, read_globals, sync

if TYPE_CHECKING:
    from pywayland.client import Display
    from pywayland.protocol.wayland import WlSeatProxy

    from holodesk.automation.input.wlroots.virtual_pointer_protocol import VirtualPointerProxy

log = logging.getLogger(__name__)

PYWAYLAND_PACKAGE = "pywayland"
# Linux input event codes of the buttons (linux/input-event-codes.h).
BUTTON_CODES = {MouseButton.LEFT: 0x110, MouseButton.RIGHT: 0x111, MouseButton.MIDDLE: 0x112}
# The crash markers name buttons by their X numbers (held_input.BUTTON_NUMBERS), on every desktop.
MARKER_NUMBERS = {0x110: 1, 0x112: 2, 0x111: 3}
WL_SEAT_CAPABILITY_POINTER = 1
# One wheel notch: libinput's 15 degrees, which programs read as one step (Qt: 120 eighths of a degree).
NOTCH_DEGREES = 15.0
WHAT = "pointer input"


class WlrootsPointer:
    """The virtual pointer of one run; `check` says in words when it cannot serve, before anything is sent."""

    def __init__(
        self,
        *,
        environ: dict[str, str] | None = None,
        ack_timeout_s: float = 2.0,
        bind_settle_s: float = 0.3,
        multi_click_interval_s: float = 0.1,
        drag_step_px: int = 12,
        drag_step_interval_s: float = 0.008,
        scroll_notch_interval_s: float = 0.04,
        marker: HeldInputMarker | None = None,
    ) -> None:
        self._environ = environ
        self._marker = marker if marker is not None else HeldInputMarker(display=marker_display(environ))
        self._marked: dict[int, contextlib.ExitStack] = {}  # button code -> its open crash-marker block
        self.ack_timeout_s = ack_timeout_s
        self.bind_settle_s = bind_settle_s
        # Below the double-click interval of every desktop (Qt's default 400 ms), at a person's pace.
        self.multi_click_interval_s = multi_click_interval_s
        self.drag_step_px = drag_step_px
        self.drag_step_interval_s = drag_step_interval_s
        self.scroll_notch_interval_s = scroll_notch_interval_s
        self._lock = threading.RLock()
        self._display: Display | None = None
        self._device: VirtualPointerProxy | None = None
        self._held: set[int] = set()
        self._at: Point | None = None

    # -- availability (sends no input) --------------------------------------------------------------

    def check(self, monitors: Sequence[Monitor]) -> None:
        """ActionError in words when pointer input cannot be sent here; opens the device on first use."""
        scaled = [m for m in monitors if m.scale != 1.0]
        if scaled:
            raise ActionError(
                f"pointer actions on {', '.join(str(m) for m in scaled)} are not available: Holodesk's wlroots "
                "pointer works only at scale 1 (sway's layout pixels are then the screen's)"
            )
        with self._lock:
            if self._device is None:
                self._open()  # tried again at the next check when it fails: the desktop may have changed

    def _open(self) -> None:
        try:
            from pywayland.client import Display
            from pywayland.protocol.wayland import WlSeat

            # Local: the protocol module imports pywayland, which is optional (its absence is refused in words).
            from holodesk.automation.input.wlroots.virtual_pointer_protocol import (
                MANAGER_NAME,
                VirtualPointerManager,
            )
        except ImportError as exc:
            raise ActionError(
                f"pointer actions on a wlroots desktop need the Python package {PYWAYLAND_PACKAGE} ({exc}): "
                f"pip install {PYWAYLAND_PACKAGE} (Holodesk's Linux install includes it)"
            ) from exc
        display = Display(display_name(self._environ))
        try:
            display.connect()
        except Exception as exc:  # pywayland raises ValueError, cffi its own
            raise ActionError(f"pointer actions: cannot connect to the Wayland display ({exc})") from exc
        try:
            registry, globals_ = read_globals(display, self.ack_timeout_s, WHAT)
            if MANAGER_NAME not in globals_:
                raise ActionError(
                    "pointer actions are not available: this compositor does not offer the wlroots virtual-pointer "
                    f"protocol ({MANAGER_NAME})"
                )
            if "wl_seat" not in globals_:
                raise ActionError("pointer actions are not available: the Wayland compositor offers no seat")
            seat: WlSeatProxy = registry.bind(globals_["wl_seat"][0], WlSeat, 1)
            capabilities: list[int] = []
            seat.dispatcher["capabilities"] = lambda _seat, value: capabilities.append(value)
            self._sync(display)
            had_pointer = bool(capabilities and capabilities[-1] & WL_SEAT_CAPABILITY_POINTER)
            manager = registry.bind(globals_[MANAGER_NAME][0], VirtualPointerManager, 1)
            device = manager.create_virtual_pointer(seat)
            self._sync(display)
            if not had_pointer:
                await_seat_capability(
                    display, capabilities, WL_SEAT_CAPABILITY_POINTER, "pointer", self.ack_timeout_s, WHAT
                )
                # Unobservable from here: the windows binding their pointers after the seat announced one.
                time.sleep(self.bind_settle_s)
        except DesktopRefused as exc:
            display.disconnect()
            raise ActionError(f"pointer actions: {exc}") from exc
        except BaseException:  # any failure, Ctrl+C included: disconnect, then re-raise it unchanged
            display.disconnect()
            raise
        self._display, self._device = display, device
        log.info("wlroots virtual pointer open (the seat had a pointer before: %s)", had_pointer)

    # -- sending --------------------------------------------------------------------------------------

    def move(self, point: Point, monitors: Sequence[Monitor]) -> None:
        """The pointer to the screen pixel `point` (a motion, its frame, the compositor's acknowledgement)."""
        desktop = virtual_desktop(monitors)
        with self._lock:
            device = self._opened()
            device.motion_absolute(
                _now_ms(), point.x - desktop.left, point.y - desktop.top, desktop.width, desktop.height
            )
            self._frame()
            self._at = point

    def click(self, button: MouseButton, count: int, cancel: CancelToken) -> None:
        code = BUTTON_CODES[MouseButton(button)]
        for index in range(count):
            if index and cancel.sleep(self.multi_click_interval_s):
                cancel.raise_if_cancelled()
            self._button(code, pressed=True)
            self._button(code, pressed=False)

    def drag(self, button: MouseButton, end: Point, monitors: Sequence[Monitor], cancel: CancelToken) -> None:
        """Press `button` where the pointer is, move in steps to `end`, release it (also on a stop or a fault)."""
        start = self._at
        if start is None:
            raise AssertionError("a drag starts where the pointer was moved to")
        code = BUTTON_CODES[MouseButton(button)]
        self._button(code, pressed=True)
        try:
            for point in drag_path(start, end, self.drag_step_px):
                if cancel.sleep(self.drag_step_interval_s):
                    cancel.raise_if_cancelled()
                self.move(point, monitors)
        finally:
            self._release(code)

    def scroll(self, direction: ScrollDirection, notches: int, cancel: CancelToken) -> None:
        # Local: the protocol module imports pywayland, which is optional (its absence is refused in words).
        from holodesk.automation.input.wlroots.virtual_pointer_protocol import (
            AXIS_HORIZONTAL,
            AXIS_SOURCE_WHEEL,
            AXIS_VERTICAL,
        )

        axis = AXIS_VERTICAL if direction in (ScrollDirection.UP, ScrollDirection.DOWN) else AXIS_HORIZONTAL
        sign = -1 if direction in (ScrollDirection.UP, ScrollDirection.LEFT) else 1
        for index in range(notches):
            if index and cancel.sleep(self.scroll_notch_interval_s):
                cancel.raise_if_cancelled()
            with self._lock:
                device = self._opened()
                device.axis_source(AXIS_SOURCE_WHEEL)
                device.axis_discrete(_now_ms(), axis, sign * NOTCH_DEGREES, sign)
                self._frame()

    def _button(self, code: int, *, pressed: bool) -> None:
        # Local: the protocol module imports pywayland, which is optional (its absence is refused in words).
        from holodesk.automation.input.wlroots.virtual_pointer_protocol import BUTTON_PRESSED, BUTTON_RELEASED

        with self._lock:
            device = self._opened()
            if pressed and code not in self._marked:
                marked = contextlib.ExitStack()
                try:
                    marked.enter_context(self._marker.holding(buttons=[MARKER_NUMBERS[code]]))
                except MarkerUnavailable as exc:  # nothing is pressed that a later start could not release
                    raise ActionError(str(exc)) from exc
                self._marked[code] = marked
            device.button(_now_ms(), code, BUTTON_PRESSED if pressed else BUTTON_RELEASED)
            if pressed:
                self._held.add(code)
            else:
                self._held.discard(code)
            self._frame()
            if not pressed and code in self._marked:  # only once the compositor has taken the release
                self._marked.pop(code).close()

    def release_button(self, code: int) -> None:
        """Send a release of `code` (a Linux button code): what a killed run left down, at the next start."""
        self._button(code, pressed=False)

    def _release(self, code: int) -> None:
        """Release a held button; a failure here is logged, never hiding the stop or fault that led here."""
        try:
            self._button(code, pressed=False)
        except DesktopRefused as exc:
            log.warning("releasing pointer button %#x failed: %s", code, exc)

    def _frame(self) -> None:
        assert self._device is not None and self._display is not None
        self._device.frame()
        self._sync(self._display)

    def _opened(self) -> VirtualPointerProxy:
        if self._device is None:  # check opens it before anything is performed; only `close` can come between
            raise DesktopRefused("the virtual pointer was closed (the run is ending)")
        return self._device

    def _sync(self, display: Display) -> None:
        sync(display, self.ack_timeout_s, WHAT)

    # -- closing --------------------------------------------------------------------------------------

    def close(self) -> None:
        """Release any button still down, destroy the device, disconnect. Safe to call twice."""
        with self._lock:
            device, display = self._device, self._display
            if device is None or display is None:
                return
            for code in sorted(self._held):
                self._release(code)
            self._device = self._display = None
            self._held.clear()
            with contextlib.suppress(Exception):  # the compositor destroys the device with the connection anyway
                device.destroy()
                display.flush()
            display.disconnect()


def marker_display(environ: dict[str, str] | None = None) -> str:
    """The display name this Wayland desktop's crash markers carry: never an X display's, whose release is X11's."""
    name = (os.environ if environ is None else environ).get("WAYLAND_DISPLAY")
    return f"wlroots:{name or 'default'}"


def _now_ms() -> int:
    return int(time.monotonic() * 1000) & 0xFFFFFFFF
