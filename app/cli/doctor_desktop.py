"""`holodesk doctor`'s desktop checks: the display, the monitors and capture, input injection, input a
dead run left held, the desktop backend (X11, the portal, or wlroots: grim and wtype on sway) and the hotkeys.
Each returns its findings and never raises for what it finds.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from holodesk.app.cli.doctor_report import CheckResult, Status
from holodesk.app.cli.server_checks import DEFAULT_SCREEN
from holodesk.app.common.hotkey_path import OWN_WINDOWS_STOP, TRIGGER_ADVICE, HotkeyPath, plan_hotkeys
from holodesk.automation.backends import PORTAL_DESKTOPS, BackendChoice, choose_backend
from holodesk.automation.errors import AutomationError, CaptureError
from holodesk.automation.held_input import release_leftover_input
from holodesk.automation.input.wlroots.keyboard import WTYPE, WTYPE_PACKAGE
from holodesk.automation.input.wlroots.pointer import PYWAYLAND_PACKAGE, WlrootsPointer
from holodesk.automation.input.wlroots.seat_keyboard import SeatKeyboard
from holodesk.automation.pyautogui_import import import_pyautogui
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.wayland.portal import probe_remote_desktop
from holodesk.automation.wayland.stream import GST_PACKAGES, load_gstreamer
from holodesk.automation.wlroots.capture import GRIM, GRIM_PACKAGE
from holodesk.automation.wlroots.sway_outputs import sway_monitors

if TYPE_CHECKING:
    from holodesk.automation.coords import Monitor


def check_display() -> CheckResult:
    """Which display Holodesk's window and the X11 backend would use; on Wayland, whether XWayland is there."""
    if sys.platform == "darwin":
        return CheckResult("display", Status.OK, "macOS (Quartz)")
    if sys.platform == "win32":
        return CheckResult("display", Status.OK, "Windows")
    wayland = os.environ.get("WAYLAND_DISPLAY")
    x11 = os.environ.get("DISPLAY")
    if wayland:
        # app.gui is the GUI's package: a command-line module loads it only where it is needed
        from holodesk.app.gui.qt_platform import choose_qt_platform

        gui = choose_qt_platform()
        if gui.blocker:
            return CheckResult(
                "display",
                Status.WARN,
                f"Wayland ({wayland}) without XWayland (DISPLAY {'does not answer' if x11 else 'is unset'}): "
                "the tray app's overlay and approval panel need XWayland; `holodesk run` with the terminal "
                "approver works through the desktop portal (GNOME, KDE) or grim and wtype (sway)",
                fix="enable XWayland (GNOME and KDE start it by default), or run tasks with `holodesk run`",
            )
        if gui.warning:
            return CheckResult("display", Status.WARN, gui.warning, fix="unset QT_QPA_PLATFORM")
        return CheckResult("display", Status.OK, f"Wayland ({wayland}); {gui.reason}")
    if x11:
        return CheckResult("display", Status.OK, f"X11 ({x11})")
    return CheckResult(
        "display",
        Status.FAIL,
        "no display: DISPLAY and WAYLAND_DISPLAY are unset",
        fix="run inside a desktop session (or under Xvfb for testing: `xvfb-run holodesk doctor`)",
        blocking=True,
    )


def check_monitors_and_capture() -> Iterator[CheckResult]:
    capture = ScreenCapture()
    try:
        monitors = capture.monitors()
    except CaptureError as exc:
        yield CheckResult("monitors", Status.FAIL, str(exc), fix="check that the display is reachable", blocking=True)
        return
    for monitor in monitors:
        primary = " (primary)" if monitor.is_primary else ""
        yield CheckResult(f"monitor {monitor.index}", Status.OK, f"{monitor}{primary}")
    try:
        start = time.perf_counter()
        frame = capture.grab_monitor(1)
        elapsed_ms = (time.perf_counter() - start) * 1000
    except CaptureError as exc:
        yield CheckResult(
            "capture", Status.FAIL, str(exc), fix="on macOS grant Screen Recording permission", blocking=True
        )
        return
    finally:
        capture.close()
    if not frame.pixels.any():
        yield CheckResult(
            "capture",
            Status.WARN,
            f"monitor 1 grabbed in {elapsed_ms:.0f} ms but every pixel is black",
            fix="on macOS grant Screen Recording permission; elsewhere make sure the screen is not locked",
        )
    else:
        yield CheckResult(
            "capture", Status.OK, f"monitor 1 grabbed ({frame.width}x{frame.height}) in {elapsed_ms:.0f} ms"
        )


def check_input_injection() -> CheckResult:
    """Move the pointer to where it already is: proves injection works without disturbing anything."""
    if sys.platform.startswith("linux") and os.environ.get("DISPLAY"):
        try:
            from Xlib import display as xdisplay

            connection = xdisplay.Display()
            try:
                has_xtest = connection.has_extension("XTEST")
            finally:
                connection.close()
        except Exception as exc:  # python-xlib raises many kinds on a broken display
            return CheckResult("input", Status.FAIL, f"cannot open the X display: {exc}", blocking=True)
        if not has_xtest:
            return CheckResult(
                "input",
                Status.FAIL,
                "the X server has no XTEST extension: input cannot be injected",
                fix="enable XTEST in the X server",
                blocking=True,
            )
    try:
        pyautogui = import_pyautogui()
        x, y = pyautogui.position()
        pyautogui.moveTo(x, y, _pause=False)
    except Exception as exc:  # pyautogui wraps platform errors in many types
        return CheckResult(
            "input",
            Status.FAIL,
            f"pyautogui cannot move the pointer: {exc}",
            fix="on macOS grant Accessibility permission to the terminal or app",
            blocking=True,
        )
    return CheckResult("input", Status.OK, f"pointer injection works (pointer at {x}, {y})")


def check_held_input() -> CheckResult:
    """Release a mouse button or key that a killed `holodesk run` left pressed (see automation.held_input)."""

    leftover = release_leftover_input()
    if leftover.problems:
        return CheckResult(
            "held input",
            Status.WARN,
            leftover.describe(),
            fix="run `holodesk doctor` again on the display where Holodesk ran",
        )
    status = Status.WARN if leftover.buttons or leftover.keys else Status.OK
    return CheckResult("held input", status, leftover.describe())


def check_desktop_backend(display: CheckResult) -> Iterator[CheckResult]:
    """Which capture + input backend runs and why; on Wayland, whether the portal path is ready.

    Without a display there is no backend to speak of: a bad HOLODESK_BACKEND is still reported, but
    no backend is called OK next to the display's FAIL. Nothing here opens a portal session, so no
    permission dialog shows.
    """

    try:
        choice = choose_backend()
    except AutomationError as exc:
        yield CheckResult("backend", Status.FAIL, str(exc), fix="unset HOLODESK_BACKEND or set x11 / wayland / wlroots")
        return
    if display.status is Status.FAIL:
        yield CheckResult("backend", Status.INFO, "none without a display: capture, input and hotkeys need one")
        return
    if choice.name == "x11":
        yield CheckResult("backend", Status.OK, f"X11 capture (mss) and input (pyautogui): {choice.reason}")
        yield check_hotkeys()
        return
    if choice.name == "wlroots":
        yield from check_wlroots(choice)
        yield check_hotkeys()
        return
    yield CheckResult("backend", Status.OK, f"Wayland portal capture and input: {choice.reason}")

    try:
        load_gstreamer()
        yield CheckResult("gstreamer", Status.OK, "GStreamer with pipewiresrc, through PyGObject")
    except AutomationError as exc:
        yield CheckResult("gstreamer", Status.FAIL, str(exc), fix=f"apt install {GST_PACKAGES}", blocking=True)
    try:
        version = probe_remote_desktop()
        found = f"RemoteDesktop portal version {version}"
        if choice.desktop.lower() in PORTAL_DESKTOPS:
            yield CheckResult(
                "portal",
                Status.OK,
                f"{found}: the first task shows the desktop's permission dialog (turn on 'Allow remote "
                "interaction')"
                + ("" if version >= 2 else "; this portal cannot remember the permission, it asks every run"),
            )
        else:
            # Debian 12's portal answers through the GNOME backend on any desktop; that backend then fails.
            named = f"desktop {choice.desktop}" if choice.desktop else "an unnamed desktop (XDG_CURRENT_DESKTOP unset)"
            yield CheckResult(
                "portal",
                Status.WARN,
                f"{found} answers, but this is {named}, not one whose portal Holodesk knows to reach the "
                "compositor (GNOME, KDE): another desktop's portal backend may answer here and then refuse "
                "the first task (it says so in words)",
                fix="on sway set HOLODESK_BACKEND=wlroots; elsewhere use GNOME, KDE or sway",
            )
    except AutomationError as exc:
        desktop = f"this desktop ({choice.desktop})" if choice.desktop else "this Wayland desktop"
        yield CheckResult(
            "portal",
            Status.FAIL,
            f"Holodesk reaches no RemoteDesktop portal on {desktop}, so it can neither see the screen nor "
            f"click or type here: {exc}. It works on GNOME and KDE (the portal) and on sway (wlroots)",
            fix="install xdg-desktop-portal and your desktop's backend (xdg-desktop-portal-gnome / -kde); "
            "on sway set HOLODESK_BACKEND=wlroots if it was not found",
            blocking=True,
        )
    yield check_hotkeys()


def check_wlroots(choice: BackendChoice) -> Iterator[CheckResult]:
    """The wlroots path: grim and wtype installed, sway's IPC answering, and the virtual pointer opening."""
    desktop = choice.desktop or "not named"
    yield CheckResult(
        "backend",
        Status.OK,
        f"wlroots desktop ({desktop}): capture through grim (screencopy), typing through virtual keyboards "
        f"(Holodesk's own and wtype's): {choice.reason}",
    )
    for tool, package, needed_for in ((GRIM, GRIM_PACKAGE, "screenshots"), (WTYPE, WTYPE_PACKAGE, "key presses")):
        if shutil.which(tool) is None:
            yield CheckResult(
                tool, Status.FAIL, f"{tool} is not installed: no {needed_for}", fix=f"apt install {package}",
                blocking=True,
            )  # fmt: skip
        else:
            yield CheckResult(tool, Status.OK, f"{tool} found ({needed_for})")
    monitors: tuple[Monitor, ...] = ()
    try:
        monitors = sway_monitors()
    except AutomationError as exc:
        yield CheckResult(
            "monitors",
            Status.FAIL,
            str(exc),
            fix="run Holodesk in a sway session (other wlroots desktops are not supported yet)",
            blocking=True,
        )
    else:
        described = ", ".join(f"{m.name} {m.rect.width}x{m.rect.height}" for m in monitors)
        yield CheckResult("monitors", Status.OK, f"sway reports {len(monitors)}: {described or 'none active'}")
    yield check_wlroots_typing()
    yield check_wlroots_pointer(monitors)


def check_wlroots_typing() -> CheckResult:
    """Opens and closes the run's own virtual keyboard (no key pressed): what a run's first typing step does."""
    keyboard = SeatKeyboard()
    try:
        keyboard.open()
    except AutomationError as exc:
        return CheckResult(
            "typing", Status.FAIL, f"{exc}; typing steps are refused before approval",
            fix=f"pip install {PYWAYLAND_PACKAGE}" if PYWAYLAND_PACKAGE in str(exc) else "", blocking=True,
        )  # fmt: skip
    finally:
        keyboard.close()
    return CheckResult(
        "typing", Status.OK, "text through Holodesk's own virtual keyboard, exact on every layout; key combinations "
        "through wtype",
    )  # fmt: skip


def check_wlroots_pointer(monitors: tuple[Monitor, ...]) -> CheckResult:
    """Opens and closes a virtual pointer (no motion, no button): what a run's first pointer step does."""
    if not monitors:
        return CheckResult("pointer", Status.FAIL, "no monitors from sway: pointer actions cannot be placed")
    pointer = WlrootsPointer()
    try:
        pointer.check(monitors)
    except AutomationError as exc:
        return CheckResult(
            "pointer", Status.WARN, f"{exc}; such steps are refused before approval",
            fix=f"pip install {PYWAYLAND_PACKAGE}" if PYWAYLAND_PACKAGE in str(exc) else "",
        )  # fmt: skip
    finally:
        pointer.close()
    return CheckResult("pointer", Status.OK, "clicks, moves, drags and scrolls through a virtual pointer (wlroots)")


def check_hotkeys(probe: Callable[[], int] | None = None) -> CheckResult:
    """Which way the prompt and stop keys reach Holodesk here, and why (asks the portal; no dialog)."""

    plan = plan_hotkeys(probe)
    if plan.path is HotkeyPath.PYNPUT:
        try:
            import pynput.keyboard  # noqa: F401 - raises ImportError when it cannot reach the display
        except ImportError as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return CheckResult("hotkeys", Status.WARN, f"pynput cannot listen: {reason}", fix=TRIGGER_ADVICE)
        return CheckResult("hotkeys", Status.OK, f"global hotkeys through pynput: {plan.reason}")
    if plan.path is HotkeyPath.PORTAL:
        return CheckResult(
            "hotkeys",
            Status.OK,
            f"the desktop binds the prompt and stop shortcuts ({plan.reason}); the tray app asks it at start "
            f"and says which keys it got (the desktop may show a dialog); {OWN_WINDOWS_STOP}",
        )
    return CheckResult(
        "hotkeys", Status.INFO, f"no global hotkeys: {plan.reason}; {OWN_WINDOWS_STOP}", fix=TRIGGER_ADVICE
    )


def screen_size() -> tuple[int, int]:
    """The first monitor's size in pixels (what a task's screenshots have), 1920x1080 when unknown."""

    if wlroots_backend_chosen():
        try:
            rect = sway_monitors()[0].rect
        except (AutomationError, IndexError):
            return DEFAULT_SCREEN  # the monitors line says why
        return (rect.width, rect.height)
    if not (os.environ.get("DISPLAY") and x11_backend_chosen()):
        return DEFAULT_SCREEN
    capture = ScreenCapture()
    try:
        rect = capture.monitors()[0].rect
        return (rect.width, rect.height)
    except (CaptureError, IndexError):
        return DEFAULT_SCREEN
    finally:
        capture.close()


def wlroots_backend_chosen() -> bool:
    try:
        return choose_backend().name == "wlroots"
    except AutomationError:
        return False  # the backend line says what is wrong with HOLODESK_BACKEND


def x11_backend_chosen() -> bool:
    try:
        return choose_backend().name == "x11"
    except AutomationError:
        return True  # the backend line says what is wrong with HOLODESK_BACKEND
