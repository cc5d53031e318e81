"""Which way Holodesk's global keys reach it in this session, and why, in words (no Qt).

- X11, macOS, Windows: pynput listens to the keyboard (X11: and grabs the prompt hotkey).
- Wayland with the desktop portal's GlobalShortcuts (KDE Plasma, GNOME 48+): the desktop binds the
  prompt and stop shortcuts for Holodesk (automation/wayland/shortcuts.py).
- Wayland without it (GNOME 43-47, sway, Hyprland...): a desktop shortcut that runs
  `holodesk trigger` / `holodesk trigger stop`; `TRIGGER_ADVICE` says how.

A Wayland session is decided as the capture backend decides it, but without HOLODESK_BACKEND: forcing
the X11 capture (to drive XWayland windows) does not make the X server see the user's keys.
The tray app and `holodesk doctor` both use `plan_hotkeys`, so they say the same thing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from holodesk.automation.backends import BACKEND_OVERRIDE_VARIABLE, choose_backend
from holodesk.automation.wayland.portal import PortalError
from holodesk.automation.wayland.shortcuts import probe_global_shortcuts

TRIGGER_COMMANDS = "`holodesk trigger` (opens the task prompt) and `holodesk trigger stop` (stops the running task)"
TRIGGER_ADVICE = (
    f"bind desktop keyboard shortcuts to {TRIGGER_COMMANDS}. GNOME: Settings > Keyboard > View and Customize "
    "Shortcuts > Custom Shortcuts; KDE: System Settings > Shortcuts > Add New > Command or Script; "
    "sway: `bindsym Ctrl+Alt+h exec holodesk trigger` in its config; Hyprland: "
    "`bind = CTRL ALT, H, exec, holodesk trigger`"
)
OWN_WINDOWS_STOP = "the stop key pressed in Holodesk's own windows, and Stop in its menu, still stop a run"


class HotkeyPath(StrEnum):
    PYNPUT = "pynput"  # X11 grabs and listening; macOS and Windows hooks
    PORTAL = "portal"  # the desktop portal's GlobalShortcuts
    TRIGGER = "trigger"  # a desktop shortcut running `holodesk trigger`


@dataclass(frozen=True, slots=True)
class HotkeyPlan:
    path: HotkeyPath
    reason: str


def is_wayland_session(environ: Mapping[str, str] | None = None, platform: str = sys.platform) -> bool:
    """True in a Wayland session, whatever HOLODESK_BACKEND forces for capture and input."""
    env = dict(os.environ if environ is None else environ)
    env.pop(BACKEND_OVERRIDE_VARIABLE, None)
    return choose_backend(env, platform).name != "x11"  # the portal or wlroots


def plan_hotkeys(
    probe: Callable[[], int] | None = None,
    environ: Mapping[str, str] | None = None,
    platform: str = sys.platform,
) -> HotkeyPlan:
    """The path for this session. On Wayland `probe` (default: ask the portal, no dialog) decides."""
    if not is_wayland_session(environ, platform):
        where = "X11 session" if platform.startswith("linux") else platform
        return HotkeyPlan(HotkeyPath.PYNPUT, f"{where}: pynput listens to the keyboard")

    try:
        version = (probe or probe_global_shortcuts)()
    except PortalError as exc:
        return HotkeyPlan(HotkeyPath.TRIGGER, f"Wayland session and {exc}")
    reason = f"Wayland session; the desktop portal offers GlobalShortcuts (version {version})"
    return HotkeyPlan(HotkeyPath.PORTAL, reason)
