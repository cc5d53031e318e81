"""Frame sources that must be told when Holodesk itself changed the screen (hid its windows).

An X11 grab reads the X server's picture as it is now, so hiding a window, a round trip and a short
settle are enough. A compositor's screen cast (the Wayland portal's PipeWire stream) delivers
pictures later and only when the screen changes: the newest one may still show a window that was
just hidden. Such a source implements `FreshFrameSource`; whoever hides a window before a grab calls
`require_frame_after(moment, areas)`, and the next grab then uses only pictures of those areas'
monitors that arrived after `moment`, or fails with a CaptureError saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from holodesk.automation.coords import Rect


@runtime_checkable
class FreshFrameSource(Protocol):
    """A frame source whose pictures can trail the screen (see the module docstring)."""

    def require_frame_after(self, moment: float, areas: Sequence[Rect]) -> None:
        """The screen changed in `areas` (screen space) at `moment` (time.monotonic())."""
        ...
