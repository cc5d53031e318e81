"""Clicks performed one after another are spaced beyond the desktop's double-click interval.

Two single clicks that "approve all" lets through back to back would otherwise land within the
double-click time, and the program reads a double click: xterm selected the text between them. The
interval is the desktop's own, read once per run from XSETTINGS (Net/DoubleClickTime, the value GTK
and Qt programs follow on an X11 desktop): the owner of the `_XSETTINGS_S<screen>` selection keeps
the settings in its `_XSETTINGS_SETTINGS` property (the XSETTINGS specification's binary layout,
parsed by `parse_xsettings`). Where no settings daemon runs (a bare Xvfb, a Wayland session, another
system), DEFAULT_DOUBLE_CLICK_MS is used: the default of GTK (gtk-double-click-time) and of Qt
(QStyleHints::mouseDoubleClickInterval) alike. SPACING_MARGIN_MS is added on top, for the time the
click takes to reach the program.

A click here is anything that presses the left button: a click, a drag's press, a typing step's focus
click (`at`).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from holodesk.automation.actions import Action, Click, Drag, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.errors import AutomationError

DEFAULT_DOUBLE_CLICK_MS = 400
SPACING_MARGIN_MS = 100
# Bounds on a value read from the desktop: a broken daemon's 0 or 10 minutes must not rule a run.
DOUBLE_CLICK_RANGE_MS = (100, 5000)
XSETTING_NAME = "Net/DoubleClickTime"


class XSettingsError(AutomationError):
    """The _XSETTINGS_SETTINGS property does not follow the specification's layout."""


@dataclass(frozen=True, slots=True)
class DoubleClickTime:
    """The desktop's double-click interval and where it came from, in words."""

    ms: int
    source: str

    @property
    def spacing_s(self) -> float:
        """How long to wait between the end of one click and the next."""
        return (self.ms + SPACING_MARGIN_MS) / 1000


def parse_xsettings(data: bytes) -> dict[str, int | str | tuple[int, int, int, int]]:
    """The settings in an _XSETTINGS_SETTINGS property, by name (XSETTINGS specification 0.5)."""
    if len(data) < 12:
        raise XSettingsError(f"{len(data)} bytes is shorter than the 12-byte header")
    order = {0: "<", 1: ">"}.get(data[0])
    if order is None:
        raise XSettingsError(f"unknown byte order {data[0]}")
    (count,) = struct.unpack_from(f"{order}I", data, 8)
    settings: dict[str, int | str | tuple[int, int, int, int]] = {}
    at = 12
    try:
        for _ in range(count):
            kind, length = data[at], struct.unpack_from(f"{order}H", data, at + 2)[0]
            name = data[at + 4 : at + 4 + length].decode("ascii")
            at += 4 + length + (-length % 4) + 4  # the name, its padding, the last-change serial
            if kind == 0:
                settings[name] = struct.unpack_from(f"{order}i", data, at)[0]
                at += 4
            elif kind == 1:
                (size,) = struct.unpack_from(f"{order}I", data, at)
                settings[name] = data[at + 4 : at + 4 + size].decode("utf-8")
                at += 4 + size + (-size % 4)
            elif kind == 2:
                settings[name] = struct.unpack_from(f"{order}4H", data, at)
                at += 8
            else:
                raise XSettingsError(f"setting {name!r} has unknown type {kind}")
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise XSettingsError(f"the settings end early or are garbled: {exc}") from exc
    return settings


def read_double_click_time(display_name: str | None = None) -> DoubleClickTime:
    """The X desktop's double-click interval from XSETTINGS, or the default, saying which and why."""
    default = f"default ({DEFAULT_DOUBLE_CLICK_MS} ms, as GTK and Qt)"
    name = display_name if display_name is not None else os.environ.get("DISPLAY")
    if not name:
        return DoubleClickTime(DEFAULT_DOUBLE_CLICK_MS, f"{default}: no X display")
    from Xlib import X
    from Xlib import display as xdisplay
    from Xlib import error as xerror

    try:
        display = xdisplay.Display(name)
    except (xerror.DisplayError, OSError, KeyError) as exc:
        return DoubleClickTime(DEFAULT_DOUBLE_CLICK_MS, f"{default}: cannot open the X display ({exc})")
    try:
        screen = display.get_default_screen()
        owner = display.get_selection_owner(display.intern_atom(f"_XSETTINGS_S{screen}"))
        if owner == X.NONE:
            return DoubleClickTime(DEFAULT_DOUBLE_CLICK_MS, f"{default}: no XSETTINGS manager runs")
        atom = display.intern_atom("_XSETTINGS_SETTINGS")
        reply = owner.get_full_property(atom, X.AnyPropertyType)
        if reply is None or reply.format != 8:
            return DoubleClickTime(DEFAULT_DOUBLE_CLICK_MS, f"{default}: the XSETTINGS manager holds no settings")
        value = parse_xsettings(bytes(reply.value)).get(XSETTING_NAME)
    except XSettingsError as exc:
        return DoubleClickTime(DEFAULT_DOUBLE_CLICK_MS, f"{default}: the XSETTINGS are unreadable ({exc})")
    except xerror.XError as exc:  # the manager went away while asked
        return DoubleClickTime(DEFAULT_DOUBLE_CLICK_MS, f"{default}: the XSETTINGS manager failed ({exc})")
    finally:
        display.close()
    low, high = DOUBLE_CLICK_RANGE_MS
    if not isinstance(value, int):
        return DoubleClickTime(DEFAULT_DOUBLE_CLICK_MS, f"{default}: XSETTINGS has no {XSETTING_NAME}")
    if not low <= value <= high:
        return DoubleClickTime(DEFAULT_DOUBLE_CLICK_MS, f"{default}: XSETTINGS {XSETTING_NAME}={value} is implausible")
    return DoubleClickTime(value, f"XSETTINGS {XSETTING_NAME}")


def presses_left_button(action: Action) -> bool:
    """Whether the step begins with a press the program could join to the last click."""
    return isinstance(action, Click | Drag) or (isinstance(action, TypeText) and action.at is not None)


class ClickSpacer:
    """Waits, before a click, until the last one is more than the double-click interval old."""

    def __init__(self, read: Callable[[], DoubleClickTime] = read_double_click_time) -> None:
        self._read = read
        self._interval: DoubleClickTime | None = None
        self._last_click_end: float | None = None

    @property
    def interval(self) -> DoubleClickTime:
        """The desktop's interval, read the first time it is needed."""
        if self._interval is None:
            self._interval = self._read()
        return self._interval

    def wait_before(self, action: Action, cancel: CancelToken) -> float:
        """Wait (cancellably) as long as `action` must to stay a click of its own; returns the wait in s."""
        if not presses_left_button(action) or self._last_click_end is None:
            return 0.0
        remaining = self._last_click_end + self.interval.spacing_s - time.monotonic()
        if remaining <= 0:
            return 0.0
        cancel.sleep(remaining)
        cancel.raise_if_cancelled()
        return remaining

    def performed(self, action: Action) -> None:
        """Note that `action` ended now."""
        if presses_left_button(action):
            self._last_click_end = time.monotonic()
