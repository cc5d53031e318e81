"""Import pyautogui without its optional MouseInfo tool, which can end the process.

pyautogui imports `mouseinfo` (a Tk window showing pointer coordinates) when it is installed, and
mouseinfo calls `sys.exit` at import time when tkinter is missing, as with Debian's Python without
python3-tk: Holodesk would exit with no message the first time it sends input. Holodesk never uses
MouseInfo, so the import is made to fail the way pyautogui expects (ImportError, which it handles)
before pyautogui is imported. Any other SystemExit during the import becomes an error with words.
"""

from __future__ import annotations

import sys
from typing import Any


class PyautoguiUnavailable(ImportError):
    """pyautogui could not be imported; the message says why."""


def import_pyautogui() -> Any:  # pyautogui has no type information
    """The pyautogui module, imported with MouseInfo blocked (see the module docstring)."""
    if "pyautogui" in sys.modules:
        return sys.modules["pyautogui"]
    # None in sys.modules makes `import mouseinfo` raise ImportError, which pyautogui catches.
    sys.modules.setdefault("mouseinfo", None)  # type: ignore[arg-type]
    try:
        import pyautogui
    except SystemExit as exc:  # a dependency gave up at import time: never let it end Holodesk silently
        raise PyautoguiUnavailable(f"importing pyautogui tried to exit the program: {exc.code}") from None
    return pyautogui
