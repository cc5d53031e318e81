"""The one root of the app's own errors: HolodeskAppError.

Every exception class defined under holodesk.app derives from it (tests/app/test_error_roots.py walks
them), so a caller can catch the app's refusals with one clause and know they are worded for people.
A class keeps a builtin second base (ValueError, TimeoutError, FileNotFoundError) where callers catch
it by that builtin; the automation layer's errors have their own root, AutomationError.
"""

from __future__ import annotations


class HolodeskAppError(Exception):
    """An error the app raises on purpose, with a message written for the person using it."""
