"""The `holodesk` command as the tests start it: this interpreter, the installed entry point's module."""

from __future__ import annotations

import sys

HOLODESK_COMMAND = (sys.executable, "-m", "holodesk.app.cli")
