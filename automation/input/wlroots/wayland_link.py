"""The Wayland client plumbing the wlroots devices share (virtual pointer, seat keyboard): the display's
name, a bounded round trip, the compositor's globals, and the wait for the seat to announce a device.
pywayland is imported by the callers."""

from __future__ import annotations

import os
import select
import time
from typing import TYPE_CHECKING

from holodesk.automation.errors import DesktopRefused

if TYPE_CHECKING:
    from pywayland.client import Display
    from pywayland.protocol.wayland import WlRegistryProxy


def display_name(environ: dict[str, str] | None) -> str | None:
    """WAYLAND_DISPLAY of `environ` (this process's when None), as an absolute path where it is relative."""
    env = os.environ if environ is None else environ
    name = env.get("WAYLAND_DISPLAY")
    if name and not os.path.isabs(name) and env.get("XDG_RUNTIME_DIR"):
        # libwayland reads XDG_RUNTIME_DIR from this process, which may not be the environment asked for.
        return os.path.join(env["XDG_RUNTIME_DIR"], name)
    return name


def sync(display: Display, timeout_s: float, what: str) -> None:
    """Wait, at most `timeout_s`, for the compositor to answer a wl_display.sync sent after what went
    before: it has then handled all of it. DesktopRefused in words (naming `what`) when it does not."""
    done: list[bool] = []
    callback = display.sync()
    callback.dispatcher["done"] = lambda _callback, _data: done.append(True)
    deadline = time.monotonic() + timeout_s
    fd = display.get_fd()
    try:
        while not done:
            if display.flush() < 0:
                raise DesktopRefused("the Wayland compositor closed the connection (sending failed)")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DesktopRefused(f"the Wayland compositor did not acknowledge {what} within {timeout_s:g} s")
            readable, _, _ = select.select([fd], [], [], remaining)
            if readable:
                display.read()
            display.dispatch(block=False)
    except RuntimeError as exc:  # pywayland's "Failed to read events" / a protocol error
        raise DesktopRefused(f"the Wayland connection failed: {exc}") from exc


def read_globals(display: Display, timeout_s: float, what: str) -> tuple[WlRegistryProxy, dict[str, tuple[int, int]]]:
    """The registry and the compositor's globals: interface name -> (its registry name, its version)."""
    found: dict[str, tuple[int, int]] = {}
    registry: WlRegistryProxy = display.get_registry()

    def on_global(_registry: object, name: int, interface: str, version: int) -> None:
        found.setdefault(interface, (name, version))  # a handler's return value goes back to C

    registry.dispatcher["global"] = on_global
    sync(display, timeout_s, what)
    return registry, found


def await_seat_capability(
    display: Display, capabilities: list[int], capability: int, device: str, timeout_s: float, what: str
) -> None:
    """Round trips until the seat's latest capabilities event (`capabilities`, filled by the seat's
    handler) holds `capability`: after a virtual `device` ("keyboard", "pointer") was created on a seat
    that had none. DesktopRefused in words after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not (capabilities and capabilities[-1] & capability):
        if time.monotonic() > deadline:
            raise DesktopRefused(
                f"the seat announced no {device} within {timeout_s:g} s of the virtual {device}'s creation"
            )
        sync(display, timeout_s, what)
