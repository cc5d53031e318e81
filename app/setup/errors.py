"""The one error `holodesk setup` reports: a sentence for the person, and nothing changed in the settings."""

from __future__ import annotations

from holodesk.app.common.errors import HolodeskAppError


class SetupError(HolodeskAppError):
    """A refusal or fault of the set-up, in words (what happened, and what to do)."""
