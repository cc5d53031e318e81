"""Releases the pointer buttons a killed run left held on a wlroots desktop, named by its crash markers.

sway keeps a button down when the device that pressed it dies with it (kill -9 mid-drag), until some
device releases it. The pointer names each pressed button in a crash marker (automation/held_input.py)
from before its press until after its release; at the next start this module finds the markers of dead
processes for this Wayland display, sends a release of exactly those buttons through a new virtual
pointer, and removes the markers. Only the named buttons: sway passes a release of a button that is not
down on to the window. Never raises: a failure is said in words and the markers stay for the next try.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from pathlib import Path

from holodesk.automation.errors import AutomationError
from holodesk.automation.held_input import LeftoverRelease, leftover_markers
from holodesk.automation.input.wlroots.pointer import MARKER_NUMBERS, WlrootsPointer, marker_display

log = logging.getLogger(__name__)

CODES_OF_NUMBERS = {number: code for code, number in MARKER_NUMBERS.items()}


def release_leftover_buttons(folder: Path | None = None, environ: dict[str, str] | None = None) -> LeftoverRelease:
    """Release what killed runs left held on this Wayland display (WAYLAND_DISPLAY) and remove their markers."""
    try:
        markers = leftover_markers(folder, marker_display(environ))
    except OSError as exc:
        return LeftoverRelease(problems=(f"cannot look for held-input markers: {exc}",))
    if not markers:
        return LeftoverRelease()
    numbers = sorted({int(b) for _, record in markers for b in record.get("buttons", []) if str(b).isdigit()})
    pointer = WlrootsPointer(environ=environ)
    try:
        pointer.check(())  # opens the device; sends nothing
        for number in numbers:
            if number in CODES_OF_NUMBERS:
                pointer.release_button(CODES_OF_NUMBERS[number])
    except AutomationError as exc:  # no pywayland, no compositor, no acknowledgement: said, markers kept
        return LeftoverRelease(len(markers), problems=(f"could not release held input on wlroots: {exc}",))
    finally:
        pointer.close()
    for path, _ in markers:
        with suppress(FileNotFoundError):
            path.unlink()
    result = LeftoverRelease(len(markers), tuple(n for n in numbers if n in CODES_OF_NUMBERS))
    log.warning("%s", result.describe())
    return result
