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

__all__ = ["Qt", "QtCore", "QtGui", "QtNetwork", "QtWidgets", "Signal", "Slot"]
