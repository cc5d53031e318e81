"""The one import point for Qt. Every other module under app/ imports Qt names from here.

Keeping PySide6 behind one module means a binding change, a version check or a missing-library
message happens in one place, and nothing outside app/ can grow a Qt dependency by accident.
"""

from __future__ import annotations

try:
    from PySide6 import QtCore, QtGui, QtNetwork, QtWidgets
except ImportError as exc:  # pragma: no cover - only on a broken install
    raise ImportError(
        f"Holodesk's window needs PySide6 and the system's Qt libraries ({exc}); on Debian/Ubuntu install"
        " libxcb-cursor0 libxkbcommon-x11-0 libegl1, then `pip install pyside6-essentials`"
    ) from exc

Qt = QtCore.Qt
Signal = QtCore.Signal
Slot = QtCore.Slot

# A small window that floats above the user's work and never takes the keyboard from it (the control
# window, the thinking status, the loading window): keys the user or an action types must reach
# the user's window. Show such windows with WA_ShowWithoutActivating too.
FLOATING_NO_FOCUS = (
    Qt.WindowType.Tool
    | Qt.WindowType.FramelessWindowHint
    | Qt.WindowType.WindowStaysOnTopHint
    | Qt.WindowType.WindowDoesNotAcceptFocus
)

__all__ = ["FLOATING_NO_FOCUS", "Qt", "QtCore", "QtGui", "QtNetwork", "QtWidgets", "Signal", "Slot"]
