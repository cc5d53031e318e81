"""The Qt bindings the app is installed with keep Python's reference counts.

PySide6 6.12.0 on Python 3.11 drops a reference to None on every call of a method that returns
nothing (QLabel.setText, QMessageBox.open, ...): after some thousands of calls the interpreter aborts
with "deallocating None" (seen at the end of this suite, and it would end a long tray session).
pyproject.toml excludes that release; this test fails on any release with the same fault.
"""

from __future__ import annotations

import sys

from holodesk.app.gui.qt import QtWidgets


def test_calls_that_return_nothing_leave_the_reference_counts_of_none_true_and_false_alone(qapp) -> None:  # type: ignore[no-untyped-def]
    label = QtWidgets.QLabel()
    box = QtWidgets.QMessageBox()
    calls = 200

    def counts() -> tuple[int, int, int]:
        return sys.getrefcount(None), sys.getrefcount(True), sys.getrefcount(False)

    before = counts()
    for index in range(calls):
        label.setText(f"step {index}")
        box.setDetailedText("a diff")
        label.setVisible(index % 2 == 0)
        box.isVisible()
    after = counts()
    # Other code may hold or release a few references meanwhile; a leak per call shows as hundreds.
    drift = [a - b for a, b in zip(after, before, strict=True)]
    assert all(abs(d) < calls // 4 for d in drift), f"reference counts of (None, True, False) moved by {drift}"
