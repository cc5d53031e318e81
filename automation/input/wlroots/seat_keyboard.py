"""The run's own virtual keyboard on wlroots desktops: kept on the seat, and the one text is typed on.

Kept on the seat: each wtype call (key combinations) makes a virtual keyboard and destroys it when
done. On a desktop without a physical keyboard (a headless sway, a virtual machine, a kiosk) the seat
then has no keyboard between calls: sway withdraws the seat's keyboard capability, the programs
release their wl_keyboard, and at the next call they ask for one again only after the seat announces
it, by when wtype's first keys may have been pressed. Those arrive as "already down" in the keyboard's
enter event, which programs do not type (the protocol's rule), so they are lost. Seen on headless
sway 1.7 with foot (its Wayland log: `enter(..., array[4])`, then only the key's release): the first
key of 13 texts in 25, and under load (load average 5 on 2 cores) also the key after wtype's warm-up
Shift, an Enter or a letter, 2 calls in 20, each step reported as done. With one virtual keyboard
kept on the seat for the run, 0 of 100 were lost, with or without the Shift.

Text is typed on it (`type_text`), each chunk with a keymap of its own characters placed on character
keys (text_keymap.py says why: Chromium acted on wtype's key numbers as Backspace and Ctrl).

Made once through pywayland (virtual_keyboard_protocol.py), destroyed by `close` (or with the process:
the compositor removes a dead client's devices). When the seat had no keyboard before it, the programs
bind theirs after the seat announces it, which nothing here can see: one pause, `bind_settle_s`, once
per run (as the virtual pointer's).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from holodesk.automation.cancel import CancelToken
from holodesk.automation.errors import ActionError, DesktopRefused
from holodesk.automation.input.wlroots.text_keymap import text_chunks
from holodesk.automation.input.wlroots.wayland_link import await_seat_capability, display_name, read_globals, sync

if TYPE_CHECKING:
    from pywayland.client import Display

    from holodesk.automation.input.wlroots.virtual_keyboard_protocol import VirtualKeyboardProxy

log = logging.getLogger(__name__)

PYWAYLAND_PACKAGE = "pywayland"
WL_SEAT_CAPABILITY_KEYBOARD = 2
# One key, Shift, which this keyboard never presses: the compositor needs a keymap for the device.
KEYMAP = """xkb_keymap {
xkb_keycodes "(unnamed)" { minimum = 8; maximum = 9; <K1> = 9; };
xkb_types "(unnamed)" { include "complete" };
xkb_compatibility "(unnamed)" { include "complete" };
xkb_symbols "(unnamed)" { key <K1> { [ Shift_L ] }; };
};
"""
WHAT = "the seat keyboard"
KEY_RELEASED = 0
KEY_PRESSED = 1
KEYS_BETWEEN_STOP_CHECKS = 16


class SeatKeyboard:
    """The run's idle virtual keyboard; `open` says in words when it cannot be made, before anything is typed."""

    def __init__(
        self,
        *,
        environ: dict[str, str] | None = None,
        ack_timeout_s: float = 2.0,
        bind_settle_s: float = 0.3,
        key_pause_s: float = 0.002,
    ) -> None:
        self._environ = environ
        self.key_pause_s = key_pause_s
        self.ack_timeout_s = ack_timeout_s
        self.bind_settle_s = bind_settle_s
        self._lock = threading.Lock()
        self._display: Display | None = None
        self._device: VirtualKeyboardProxy | None = None

    @property
    def is_open(self) -> bool:
        return self._device is not None

    def open(self) -> None:
        """Make the keyboard unless it is there; ActionError in words when it cannot be (tried again next time)."""
        with self._lock:
            if self._device is None:
                self._open()

    def _open(self) -> None:
        try:
            from pywayland.client import Display
            from pywayland.protocol.wayland import WlSeat

            # Local: the protocol module imports pywayland, which is optional (its absence is refused in words).
            from holodesk.automation.input.wlroots.virtual_keyboard_protocol import (
                MANAGER_NAME,
                VirtualKeyboardManager,
            )
        except ImportError as exc:
            raise ActionError(
                f"typing on a wlroots desktop needs the Python package {PYWAYLAND_PACKAGE} ({exc}), which keeps a "
                f"keyboard on the seat so programs miss no keys: pip install {PYWAYLAND_PACKAGE} (Holodesk's Linux "
                "install includes it)"
            ) from exc
        display = Display(display_name(self._environ))
        try:
            display.connect()
        except Exception as exc:  # pywayland raises ValueError, cffi its own
            raise ActionError(f"typing: cannot connect to the Wayland display ({exc})") from exc
        try:
            registry, globals_ = read_globals(display, self.ack_timeout_s, WHAT)
            if MANAGER_NAME not in globals_:
                raise ActionError(
                    "typing is not available: this compositor does not offer the virtual-keyboard protocol "
                    f"({MANAGER_NAME})"
                )
            if "wl_seat" not in globals_:
                raise ActionError("typing is not available: the Wayland compositor offers no seat")
            seat = registry.bind(globals_["wl_seat"][0], WlSeat, 1)
            capabilities: list[int] = []
            seat.dispatcher["capabilities"] = lambda _seat, value: capabilities.append(value)
            sync(display, self.ack_timeout_s, WHAT)
            had_keyboard = bool(capabilities and capabilities[-1] & WL_SEAT_CAPABILITY_KEYBOARD)
            manager = registry.bind(globals_[MANAGER_NAME][0], VirtualKeyboardManager, 1)
            device = manager.create_virtual_keyboard(seat)
            self._send_keymap(device, display, KEYMAP)
            if not had_keyboard:
                await_seat_capability(
                    display, capabilities, WL_SEAT_CAPABILITY_KEYBOARD, "keyboard", self.ack_timeout_s, WHAT
                )
                # Unobservable from here: the programs binding their keyboards after the seat announced one.
                time.sleep(self.bind_settle_s)
        except DesktopRefused as exc:
            display.disconnect()
            raise ActionError(f"typing: {exc}") from exc
        except BaseException:  # any failure, Ctrl+C included: disconnect, then re-raise it unchanged
            display.disconnect()
            raise
        self._display, self._device = display, device
        log.info("wlroots seat keyboard open (the seat had a keyboard before: %s)", had_keyboard)

    # -- typing ---------------------------------------------------------------------------------------

    def type_text(self, text: str, cancel: CancelToken) -> None:
        """Type `text` on this keyboard (text_keymap.py: each chunk's own keymap, its characters on character
        keys), each press and release acknowledged by the compositor (bounded) and followed by `key_pause_s`;
        the stop is checked between chunks and every few keys, never between a press and its release.

        The pause is for the program, which nothing here can watch: the compositor disconnects a program
        whose unread events fill its buffer (seen: a GTK entry lost its connection after 321 of 601 keys
        sent back to back). 2 ms after each press and release is wtype's own pace."""
        for chunk in text_chunks(text):
            cancel.raise_if_cancelled()
            with self._lock:
                device, display = self._opened()
                self._send_keymap(device, display, chunk.keymap)
            for index, code in enumerate(chunk.keys):
                if index and index % KEYS_BETWEEN_STOP_CHECKS == 0:
                    cancel.raise_if_cancelled()
                for state in (KEY_PRESSED, KEY_RELEASED):
                    with self._lock:
                        device, display = self._opened()
                        device.key(_now_ms(), code, state)
                        sync(display, self.ack_timeout_s, WHAT)
                    time.sleep(self.key_pause_s)

    def _send_keymap(self, device: VirtualKeyboardProxy, display: Display, keymap: str) -> None:
        # Local: the protocol module imports pywayland, which is optional (its absence is refused in words).
        from holodesk.automation.input.wlroots.virtual_keyboard_protocol import KEYMAP_FORMAT_XKB_V1

        data = keymap.encode() + b"\0"
        fd = os.memfd_create("holodesk-keymap", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            device.keymap(KEYMAP_FORMAT_XKB_V1, fd, len(data))
            sync(display, self.ack_timeout_s, WHAT)  # sent (libwayland duplicates the fd): ours can close
        finally:
            os.close(fd)

    def _opened(self) -> tuple[VirtualKeyboardProxy, Display]:
        if self._device is None or self._display is None:  # check opens it before anything is typed
            raise DesktopRefused("the seat keyboard was closed (the run is ending)")
        return self._device, self._display

    def close(self) -> None:
        """Destroy the keyboard and disconnect. Safe to call twice."""
        with self._lock:
            device, display = self._device, self._display
            self._device = self._display = None
            if device is None or display is None:
                return
            with contextlib.suppress(Exception):  # the compositor destroys the device with the connection anyway
                device.destroy()
                display.flush()
            display.disconnect()

    def __del__(self) -> None:
        # A backend dropped without close(): left to the garbage collector, the connection and the
        # device's proxy are freed in any order, and a proxy freed after its connection crashed the
        # interpreter (seen). Closed here they go in order.
        self.close()


def _now_ms() -> int:
    return int(time.monotonic() * 1000) & 0xFFFFFFFF
