"""What a middle click would paste: the primary selection, read when the step is asked.

On X11 a middle click (or a middle drag, at its release) pastes the PRIMARY selection into the
program under the pointer, so the approval rule (automation/approval_rules.py) shows such a step
with that text. It is read with `xclip -selection primary -o` (automation/clipboard.py), which asks
the selection's owner as a pasting program would. In a Wayland session the primary selection
belongs to the compositor and no tool here can read it reliably, so a paste there is refused in
words rather than approved blind; so is any X11 read that fails (no xclip, an owner that does not
answer).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from holodesk.automation.backends import BackendSettingError, choose_backend
from holodesk.automation.clipboard import XCLIP_PRIMARY
from holodesk.automation.errors import AutomationError, ClipboardError


class PasteUnreadable(AutomationError):
    """What a paste would type cannot be read, so the step cannot be shown honestly."""


def read_primary_selection(environ: Mapping[str, str] | None = None, platform: str = sys.platform) -> str:
    """The text a middle click would paste now ("" when nothing is selected), or PasteUnreadable in words."""
    env = os.environ if environ is None else environ
    try:
        backend = choose_backend(env, platform).name
    except BackendSettingError as exc:
        raise PasteUnreadable(f"a middle click pastes the primary selection, which cannot be read: {exc}") from exc
    if backend != "x11" or not platform.startswith("linux"):
        raise PasteUnreadable(
            "a middle click pastes the primary selection, and Holodesk cannot read it in this session "
            f"({'a Wayland session' if backend != 'x11' else platform}): the step is refused"
        )
    try:
        text = XCLIP_PRIMARY.read_text()
    except ClipboardError as exc:
        raise PasteUnreadable(
            f"a middle click pastes the primary selection, which could not be read ({exc}): the step is refused"
        ) from exc
    return text or ""
