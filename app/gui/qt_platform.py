"""Chooses Qt's platform plugin before the QApplication exists: XWayland on a Wayland session.

Holodesk's overlay must stay above the user's windows, sit exactly where it asks and let clicks
through; its approval panel must stay on top. On GNOME's native Wayland, Qt gets only the
click-through (a Wayland client can neither place itself nor keep itself above others: mutter
ignores its move() and stay-on-top); the same windows through XWayland (`QT_QPA_PLATFORM=xcb`), seen
on a headless mutter, are click-through, on top and where they asked. So when WAYLAND_DISPLAY is set and
the X display in DISPLAY answers, Qt runs on xcb. The user's own QT_QPA_PLATFORM always wins.
Without XWayland the GUI cannot show its marker where the action lands, so it does not start and
says why (`NO_XWAYLAND`); `holodesk run` with the terminal approver still works through the portal.

No Qt here: `holodesk doctor` asks the same questions without starting a GUI.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass

PLATFORM_VARIABLE = "QT_QPA_PLATFORM"

NO_XWAYLAND = (
    "This is a Wayland session without XWayland (DISPLAY is {display}), and Holodesk's window needs it: "
    "on native Wayland the target marker cannot be placed on the pixel an action will click, and the "
    "approval panel cannot stay on top. Enable XWayland (GNOME and KDE run it by default), or run tasks "
    'from a terminal with `holodesk run "your task"`, which asks for approval there.'
)
NATIVE_WAYLAND_BY_USER = (
    "QT_QPA_PLATFORM={platform} runs Holodesk's window natively on Wayland: the target marker may not sit "
    "on the pixel an action will click and the approval panel may fall behind other windows. Unset "
    "QT_QPA_PLATFORM to use XWayland."
)


@dataclass(frozen=True, slots=True)
class QtPlatformChoice:
    """What Qt should run on, and why, in words.

    `platform` is the QT_QPA_PLATFORM value to set ("xcb"), or None to leave Qt's own choice (or the
    user's). `blocker` is set when the GUI must not start; `warning` when it starts with a limitation.
    """

    platform: str | None
    reason: str
    blocker: str | None = None
    warning: str | None = None


def x_display_answers(display: str) -> bool:
    """Whether the X server named `display` accepts a connection from this user (XAUTHORITY honoured)."""
    try:
        from Xlib import display as xdisplay

        connection = xdisplay.Display(display)
    except Exception:  # python-xlib raises several kinds for a missing, refused or unauthorised display
        return False
    connection.close()
    return True


def choose_qt_platform(
    environ: Mapping[str, str] | None = None,
    *,
    platform: str = sys.platform,
    display_answers: Callable[[str], bool] = x_display_answers,
) -> QtPlatformChoice:
    """The platform plugin for this session (see the module docstring)."""
    env = os.environ if environ is None else environ
    wayland = env.get("WAYLAND_DISPLAY", "")
    display = env.get("DISPLAY", "")
    chosen_by_user = env.get(PLATFORM_VARIABLE, "").strip()
    if chosen_by_user:
        native = wayland and chosen_by_user.split(":")[0].startswith("wayland")
        warning = NATIVE_WAYLAND_BY_USER.format(platform=chosen_by_user) if native else None
        return QtPlatformChoice(None, f"{PLATFORM_VARIABLE}={chosen_by_user}, set by the user", warning=warning)
    if not platform.startswith("linux") or not wayland:
        return QtPlatformChoice(None, "not a Wayland session: Qt's default")
    if display and display_answers(display):
        return QtPlatformChoice("xcb", f"Wayland session ({wayland}): the window runs through XWayland ({display})")
    shown = f"{display}, which does not answer" if display else "unset"
    return QtPlatformChoice(
        None, f"Wayland session ({wayland}) without XWayland", blocker=NO_XWAYLAND.format(display=shown)
    )


def apply_qt_platform(environ: MutableMapping[str, str] | None = None) -> QtPlatformChoice:
    """Choose, and set QT_QPA_PLATFORM for the QApplication about to start in this process."""
    env = os.environ if environ is None else environ
    choice = choose_qt_platform(env)
    if choice.platform is not None:
        env[PLATFORM_VARIABLE] = choice.platform
    return choice
