"""The one place Holodesk's own windows leave the screen before a grab the model will see.

`OwnWindowsHiddenCapture` wraps the session's capture. Each `grab()` (on the engine thread) hides
the overlay (shown again after the grab), the thinking status and the windows `also_hidden` names
(without a tray, the control window: they stay hidden until whoever showed them shows them again),
each through a blocking call into the GUI thread, then grabs once, until the picture no longer shows
any of them (capture_hiding.grab_without). A capture whose pictures trail the screen (the Wayland
portal's stream) is told when and where they went. Nothing else is passed through implicitly:
`monitors` and `close` are the capture's own.

What cannot be hidden (the tray icon, drawn by the desktop's tray) is named by `own_regions`
(the engine's ShowsOwnRegions): the engine records it with each step, so that a routine never
takes Holodesk's own icon changing for a step's effect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from holodesk.app.gui.capture_hiding import HiddenWindows, grab_without, hide_windows
from holodesk.app.gui.gui_thread import GuiThreadCaller
from holodesk.app.gui.overlay import OverlayController
from holodesk.app.gui.qt import QtWidgets
from holodesk.app.gui.thinking_status import ThinkingStatus
from holodesk.automation.backends import DesktopCapture
from holodesk.automation.coords import Monitor, Rect
from holodesk.automation.input.x11.focus_guard import FocusGuard
from holodesk.automation.screen import ScreenFrame


class OwnWindowsHiddenCapture:
    """A capture whose grabs never contain Holodesk's overlay, thinking status or control window.

    Create it on the GUI thread. `focus_guard` is told after each grab which window the user was in.
    """

    def __init__(
        self,
        capture: DesktopCapture,
        *,
        overlay: OverlayController | None = None,
        status: ThinkingStatus | None = None,
        also_hidden: Callable[[], Sequence[QtWidgets.QWidget]] = tuple,
        focus_guard: FocusGuard | None = None,
        own_regions: Callable[[], Sequence[Rect]] = tuple,
    ) -> None:
        self.capture = capture
        self.overlay = overlay
        self.status = status
        self.also_hidden = also_hidden
        self.focus_guard = focus_guard
        self._own_regions = own_regions
        self._gui = GuiThreadCaller()

    def own_regions(self) -> list[Rect]:
        """Where Holodesk's own things that no grab can leave out are now (screen pixels; any thread)."""
        return list(self._gui.call(lambda: list(self._own_regions())))

    def grab(self, monitor: int | None) -> ScreenFrame:
        with self._overlay_hidden() as overlay_hidden:
            hidden = overlay_hidden
            if self.status is not None:
                hidden = hidden.joined(self.status.hide_for_capture())
            hidden = hidden.joined(self._gui.call(lambda: hide_windows(self.also_hidden())))
            frame = grab_without(self.capture, monitor, hidden)
        if self.focus_guard is not None:
            self.focus_guard.remember()
        return frame

    @contextmanager
    def _overlay_hidden(self) -> Iterator[HiddenWindows]:
        if self.overlay is None:
            yield HiddenWindows()
            return
        with self.overlay.hidden_for_capture() as hidden:
            yield hidden

    def monitors(self) -> list[Monitor]:
        return self.capture.monitors()

    def close(self) -> None:
        self.capture.close()
