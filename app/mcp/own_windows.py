"""An agent never operates Holodesk itself: an `act` aimed at one of Holodesk's windows is refused in words.

Holodesk's windows (the approval panel of the tray app or of another `holodesk mcp`, the task prompt,
the settings, the history, the control window) are known by their titles. A pointer action whose point
lies on one, or keys that would go to one (typing or keys without a point, while one has the keyboard),
are refused before the step is shown, so no tool call can press Approve, or Enter on a panel. Where the
desktop's windows cannot be asked (Wayland), nothing is refused here; the panel's own rules still hold.
"""

from __future__ import annotations

from holodesk.automation.actions import Action, HoldAndTap, KeyCombo, Point, TypeText
from holodesk.automation.routines.windows import DesktopWindow, WindowProbe

# Titles Holodesk gives its windows (app/gui): a prefix for the panel, prompt and notices, and whole names.
OWN_TITLE_PREFIX = "Holodesk: "
OWN_TITLES = frozenset(
    {"Holodesk history", "Holodesk settings", "Holodesk control", "Holodesk overlay", "Holodesk target handle"}
)


def is_holodesk_window(window: DesktopWindow) -> bool:
    return window.name.startswith(OWN_TITLE_PREFIX) or window.name in OWN_TITLES


def own_window_refusal(action: Action, probe: WindowProbe | None) -> str | None:
    """Why `action` (screen pixels) must not be shown, in words; None when it touches none of Holodesk's windows."""
    if probe is None:
        return None
    points: tuple[Point, ...] = action.points()
    for point in points:
        window = probe.window_at(point.x, point.y)
        if window is not None and is_holodesk_window(window):
            return (
                f"refused: ({point.x}, {point.y}) on the screen is on Holodesk's own window {window.name!r};"
                " an agent may never operate Holodesk itself (only the person approves): nothing was done"
            )
    if not points and isinstance(action, TypeText | KeyCombo | HoldAndTap):
        focus = probe.keyboard_window().window
        if focus is not None and is_holodesk_window(focus):
            return (
                f"refused: the keys would go to Holodesk's own window {focus.name!r}, which has the keyboard;"
                " an agent may never operate Holodesk itself (only the person approves): nothing was done"
            )
    return None
