"""Errors of the automation layer, each specific enough to show a user as it is."""

from __future__ import annotations


class AutomationError(Exception):
    """Base of every error raised by the automation layer."""


class ActionError(AutomationError, ValueError):
    """An action is malformed: it is rejected before anything touches the desktop."""


class SelectAllNotHonoured(ActionError):
    """A typing step's select-all (overwrite) cannot be honoured where the keyboard focus is (a terminal, or
    a desktop that does not say which program has the focus). `words` say why, for the person approving:
    the engine then shows the step without select-all instead of ending the run."""

    def __init__(self, message: str, *, words: str) -> None:
        super().__init__(message)
        self.words = words


class OffScreenError(AutomationError, ValueError):
    """A point maps outside every monitor, so no input may be sent there."""


class CaptureError(AutomationError):
    """The screen could not be captured (no display, unknown monitor, grab failed)."""


class ExecutionError(AutomationError):
    """An action was valid but the desktop refused it part-way (input injection failed)."""


class Cancelled(AutomationError):
    """The user stopped the run; raised at the next point where stopping is safe."""


class ClipboardError(AutomationError):
    """The clipboard could not be read or written (no clipboard tool installed, the tool failed)."""


class DesktopRefused(AutomationError):
    """A valid action was refused by the desktop part-way (an X error, the portal, the clipboard).

    Input backends raise it while performing; the step's result then says ok=False with its words.
    """
