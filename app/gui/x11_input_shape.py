"""Let a shaped window take the mouse where it shows a hole (X11's SHAPE extension, input kind).

The marker's drag handle has a hole the size of the centre dot so the target pixel shows through
it. Qt's `setMask` shapes both what a window shows and where it takes the mouse, so a press on the
dot (where a person grabs a marker) went through the hole to the application underneath. On X11 the
input shape can differ from the shown one: `take_input_over(widget, region)` makes `region` (logical
pixels of the widget, e.g. the disc without its hole) the part that takes the mouse. Elsewhere it
does nothing and returns False.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any, cast

from holodesk.app.gui.qt import QtCore, QtGui, QtWidgets

log = logging.getLogger(__name__)


class InputShape:
    """One X connection for setting input shapes; opened on first use (GUI thread)."""

    def __init__(self) -> None:
        self._display: Any = None
        self._failed = False

    def take_input_over(self, widget: QtWidgets.QWidget, region: QtGui.QRegion) -> bool:
        """Make `region` (the widget's logical pixels) the part of its window that takes the mouse."""
        if QtGui.QGuiApplication.platformName() != "xcb" or self._failed or not os.environ.get("DISPLAY"):
            return False
        try:
            from Xlib import X
            from Xlib.ext import shape

            if self._display is None:
                from Xlib import display as xdisplay

                self._display = xdisplay.Display()
                if not self._display.has_extension("SHAPE"):
                    self._failed = True
                    return False
            ratio = widget.devicePixelRatioF()
            rectangles = [
                (round(r.x() * ratio), round(r.y() * ratio), round(r.width() * ratio), round(r.height() * ratio))
                for r in cast("Iterable[QtCore.QRect]", region)  # PySide6's stubs do not declare its iteration
            ]
            window = self._display.create_resource_object("window", int(widget.winId()))
            window.shape_rectangles(shape.SO.Set, shape.SK.Input, X.Unsorted, 0, 0, rectangles)
            self._display.flush()
            return True
        except Exception:  # no python-xlib, no SHAPE, a connection refused: the hole passes the mouse, as before
            log.debug("cannot set the handle's input shape", exc_info=True)
            self._failed = True
            return False
