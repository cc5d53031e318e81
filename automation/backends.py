"""Chooses the capture + input backend for this session: X11, the Wayland portal, or wlroots (sway).

A Wayland session is one with WAYLAND_DISPLAY set (and XDG_SESSION_TYPE not x11), or with
XDG_SESSION_TYPE=wayland and no X display; with XDG_SESSION_TYPE=wayland, DISPLAY set and no
WAYLAND_DISPLAY (Xvfb started from a Wayland terminal) the X server is the target.
Which Wayland path: a wlroots desktop (XDG_CURRENT_DESKTOP names sway, Hyprland, river, wayfire or
labwc; or, with no desktop named, sway's IPC socket SWAYSOCK is set) has no RemoteDesktop portal, so
it takes the wlroots path: grim (screencopy), wtype (virtual keyboard) and one virtual pointer kept
for the run (wlr virtual-pointer protocol, through pywayland); the monitors come from
sway's IPC, so other wlroots desktops are refused there in words. Every other Wayland desktop (GNOME,
KDE, an unknown one) takes the portal path, which refuses in words where there is no RemoteDesktop
portal. `HOLODESK_BACKEND=x11|wayland|wlroots` overrides all of it (e.g. to drive only XWayland windows).
`choose_backend` says which and why (doctor prints it); `create_backends` builds the capture and the
input performer, sharing one display (X11) or one portal session (Wayland) between them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from holodesk.automation.errors import AutomationError
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.screen import ScreenCapture

if TYPE_CHECKING:
    from holodesk.automation.coords import Monitor
    from holodesk.automation.input.x11.focus_guard import FocusGuard
    from holodesk.automation.screen import ScreenFrame

BackendName = Literal["x11", "wayland", "wlroots"]
BACKEND_NAMES: tuple[BackendName, ...] = ("x11", "wayland", "wlroots")
BACKEND_OVERRIDE_VARIABLE = "HOLODESK_BACKEND"
RESTORE_TOKEN_FILE = "wayland-screencast-restore-token"
# XDG_CURRENT_DESKTOP names (lower case) of wlroots-style desktops: the wlr protocols, no RemoteDesktop portal.
WLROOTS_DESKTOPS = ("sway", "hyprland", "river", "wayfire", "labwc")
# Desktops whose portal has RemoteDesktop: named so that a leftover SWAYSOCK does not override them.
PORTAL_DESKTOPS = ("gnome", "kde", "ubuntu", "pop", "unity")
WLROOTS_NOTICE = (
    "wlroots desktop: Holodesk sees the screen through grim, types through wtype (virtual keyboard) and "
    "points through a virtual pointer; pasting is not available here (text is typed)."
)


class BackendSettingError(AutomationError):
    """HOLODESK_BACKEND names no backend (inference.errors.BackendError is the model backend's failure)."""


@dataclass(frozen=True, slots=True)
class BackendChoice:
    """Which backend runs, and the reason in words."""

    name: BackendName
    reason: str
    desktop: str = ""  # the Wayland desktop found (XDG_CURRENT_DESKTOP, or sway from SWAYSOCK), for doctor


def choose_backend(environ: Mapping[str, str] | None = None, platform: str = sys.platform) -> BackendChoice:
    """The backend for this session (BackendSettingError for a bad HOLODESK_BACKEND)."""
    env = os.environ if environ is None else environ
    override = env.get(BACKEND_OVERRIDE_VARIABLE, "").strip().lower()
    if override:
        for name in BACKEND_NAMES:
            if override == name:
                return BackendChoice(name, f"{BACKEND_OVERRIDE_VARIABLE}={override}", wayland_desktop(env))
        raise BackendSettingError(
            f"{BACKEND_OVERRIDE_VARIABLE} must be 'x11', 'wayland' or 'wlroots', got {override!r}"
        )
    if not platform.startswith("linux"):
        return BackendChoice("x11", f"{platform}: mss and pyautogui reach the whole desktop")
    session_type = env.get("XDG_SESSION_TYPE", "").strip().lower()
    display = env.get("DISPLAY") or "unset"
    if session_type == "x11":
        return BackendChoice("x11", f"XDG_SESSION_TYPE=x11, DISPLAY={display}")
    if env.get("WAYLAND_DISPLAY"):
        return _wayland_choice(
            env, f"XDG_SESSION_TYPE={session_type or 'unset'}, WAYLAND_DISPLAY={env['WAYLAND_DISPLAY']}"
        )
    if session_type == "wayland" and not env.get("DISPLAY"):
        return _wayland_choice(env, "XDG_SESSION_TYPE=wayland")
    if session_type == "wayland":
        # No Wayland display to talk to but an X server (e.g. Xvfb started from a Wayland terminal).
        return BackendChoice("x11", f"XDG_SESSION_TYPE=wayland but WAYLAND_DISPLAY is unset; DISPLAY={display}")
    return BackendChoice("x11", f"no Wayland session detected; DISPLAY={display}")


def wayland_desktop(environ: Mapping[str, str]) -> str:
    """The desktop's name: XDG_CURRENT_DESKTOP's first entry, else "sway" where SWAYSOCK is set, else ""."""
    named = [part.strip() for part in environ.get("XDG_CURRENT_DESKTOP", "").split(":") if part.strip()]
    if named:
        return named[0]
    return "sway" if environ.get("SWAYSOCK") else ""


def is_wlroots_desktop(environ: Mapping[str, str]) -> bool:
    """A wlroots desktop: XDG_CURRENT_DESKTOP names one, or names none of the portal desktops and SWAYSOCK is set."""
    named = [part.strip().lower() for part in environ.get("XDG_CURRENT_DESKTOP", "").split(":")]
    if any(name in WLROOTS_DESKTOPS for name in named):
        return True
    if any(name in PORTAL_DESKTOPS for name in named):
        return False  # a SWAYSOCK left over from a sway started inside GNOME or KDE does not make this sway
    return bool(environ.get("SWAYSOCK"))


def _wayland_choice(env: Mapping[str, str], session: str) -> BackendChoice:
    desktop = wayland_desktop(env)
    if is_wlroots_desktop(env):
        found = (
            f"XDG_CURRENT_DESKTOP={env['XDG_CURRENT_DESKTOP']}" if env.get("XDG_CURRENT_DESKTOP") else "SWAYSOCK set"
        )
        return BackendChoice("wlroots", f"{session}; wlroots desktop ({found}): no RemoteDesktop portal", desktop)
    named = f"desktop {desktop}" if desktop else "desktop not named (XDG_CURRENT_DESKTOP unset)"
    return BackendChoice("wayland", f"{session}; {named}", desktop)


def unknown_desktop_notice(desktop: str) -> str:
    """What the portal path tells the user on a desktop it does not know (one neither GNOME nor KDE)."""
    named = f"This desktop ({desktop})" if desktop else "This desktop (XDG_CURRENT_DESKTOP is unset)"
    return (
        f"{named} is not one Holodesk knows: it tries the desktop portal's RemoteDesktop, which GNOME and "
        "KDE offer and wlroots desktops do not (on sway Holodesk uses grim and wtype: HOLODESK_BACKEND=wlroots)."
    )


def restore_token_path() -> Path:
    """Where the portal's ScreenCast restore token is kept (the user's state folder)."""
    from platformdirs import user_state_path

    return user_state_path("holodesk", appauthor=False) / RESTORE_TOKEN_FILE


class DesktopCapture(Protocol):
    """Captures the desktop (ScreenCapture on X11, WaylandCapture through the portal, GrimCapture on wlroots)."""

    def grab(self, monitor: int | None) -> ScreenFrame: ...

    def monitors(self) -> list[Monitor]: ...

    def close(self) -> None:
        """Release the capture (on Wayland this ends the portal session: the desktop stops sharing)."""
        ...


@dataclass(frozen=True, slots=True)
class Backends:
    """The capture and the input performer of one session, sharing one display or portal session."""

    capture: DesktopCapture
    performer: InputPerformer

    def close(self) -> None:
        """Give back the input backend's bindings, then the capture (and with it a portal session)."""
        try:
            self.performer.close()
        finally:
            self.capture.close()


def create_backends(
    notify: Callable[[str], None] | None = None,
    *,
    choice: BackendChoice | None = None,
    token_path: Path | None = None,
    focus_guard: FocusGuard | None = None,
) -> Backends:
    """The capture and input performer for this session; `notify` receives the consent explanations.

    `focus_guard` (X11) gives the keyboard focus back to the user's window before keys are sent.

    Nothing is opened yet: the X11 path opens the display on first use, the Wayland path starts the
    portal session (and its permission dialog) on the first grab or action; the wlroots path runs grim
    and wtype per grab and per step, opens its virtual pointer at the first pointer step's check, and
    tells `notify` what it does there.
    """
    chosen = choice if choice is not None else choose_backend()
    if chosen.name == "wlroots":
        # start-up: only a wlroots session loads the grim, wtype and virtual-pointer modules
        from holodesk.automation.input.wlroots.keyboard import WtypeKeyboard
        from holodesk.automation.input.wlroots.pointer import WlrootsPointer
        from holodesk.automation.wlroots.capture import GrimCapture

        if notify:
            notify(WLROOTS_NOTICE)
        return Backends(GrimCapture(), InputPerformer(WtypeKeyboard(pointer=WlrootsPointer())))
    if chosen.name == "wayland":
        # start-up: an X11 session never loads the portal's modules (bench/startup.py times `holodesk run`)
        from holodesk.automation.input.portal.backend import PortalInput
        from holodesk.automation.wayland.capture import WaylandCapture
        from holodesk.automation.wayland.session import RestoreTokenStore, WaylandSession

        if notify and chosen.desktop.lower() not in PORTAL_DESKTOPS:
            notify(unknown_desktop_notice(chosen.desktop))
        session = WaylandSession(RestoreTokenStore(token_path or restore_token_path()), notify)
        return Backends(WaylandCapture(session), InputPerformer(PortalInput(session)))

    capture = ScreenCapture()
    return Backends(capture, InputPerformer(X11Input(capture=capture, focus_guard=focus_guard)))
