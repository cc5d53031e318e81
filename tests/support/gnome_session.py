"""A started headless GNOME stack with this test process inside its session, for module fixtures.

`inside_gnome_session()` starts bench.rigs.gnome_stack.GnomeStack (with XWayland, as a GNOME
session has it), points this process's D-Bus, XDG, Wayland and X variables at it, and stops it at the
end. A stack that cannot come up FAILS the tests with its logs: a missing Wayland path must show in
CI, never pass silently.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import pytest

from bench.rigs.gnome_stack import GnomeStack, StackError


@contextlib.contextmanager
def inside_gnome_session(unset: Sequence[str] = (), *, layouts_hand: bool = False) -> Iterator[GnomeStack]:
    """The running stack; `unset` names variables of this process the session must not inherit;
    `layouts_hand` lets the test set mutter's layouts (GnomeStack.set_keymap)."""
    stack = GnomeStack(xwayland=True, layouts_hand=layouts_hand)
    try:
        stack.start()
    except StackError as exc:
        pytest.fail(f"the headless GNOME stack did not start: {exc}", pytrace=False)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in stack.env().items():
            if key.startswith(("DBUS_", "XDG_", "WAYLAND_")) or key in ("HOME", "DISPLAY", "XAUTHORITY"):
                patch.setenv(key, value)
        for key in unset:
            patch.delenv(key, raising=False)
        try:
            yield stack
        finally:
            stack.stop()
