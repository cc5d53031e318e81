"""The keys of an action go to the window the user had at the screenshot, never to one of Holodesk's.

A real xterm is the user's window; a real X window created by this process (with _NET_WM_PID, as Qt
sets it on Holodesk's windows) stands for the control window, which the user clicked after the
screenshot. The typed command must run in the xterm, and our window must receive no key.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from Xlib import X, Xatom
from Xlib import display as xdisplay

from holodesk.automation.actions import TypeText
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.input.x11.focus_guard import FocusGuard
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.virtual_display import XvfbServer
from tests.support.xterm_shell import shell_env, wait_for_prompt


def xdotool(*args: str) -> str:
    return subprocess.run(["xdotool", *args], check=True, timeout=20, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def xterm(xvfb: XvfbServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    if shutil.which("xterm") is None:
        pytest.fail("xterm is not installed (Debian: apt install xterm)", pytrace=False)
    folder = tmp_path_factory.mktemp("focus")
    env = shell_env(folder)
    process = subprocess.Popen(
        ["xterm", "-geometry", "80x10+100+100", "-e", "bash", "--norc", "--noprofile"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        window = xdotool("search", "--sync", "--onlyvisible", "--pid", str(process.pid)).split()[0]
        wait_for_prompt(folder)
        yield folder, window
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def own_window(xvfb: XvfbServer) -> Iterator[tuple[object, object]]:
    """A mapped top-level window of this process, logging the keys it receives."""
    display = xdisplay.Display()
    root = display.screen().root
    window = root.create_window(900, 600, 300, 100, 0, X.CopyFromParent, event_mask=X.KeyPressMask)
    window.change_property(display.intern_atom("_NET_WM_PID"), Xatom.CARDINAL, 32, [os.getpid()])
    window.set_wm_class("holodesk", "Holodesk")
    window.map()
    display.sync()
    time.sleep(0.2)
    yield display, window
    window.destroy()
    display.close()


def key_presses(display) -> int:  # type: ignore[no-untyped-def]
    count = 0
    while display.pending_events():
        if display.next_event().type == X.KeyPress:
            count += 1
    return count


@pytest.mark.display
def test_keys_go_back_to_the_users_window_when_ours_took_the_focus(xterm, own_window) -> None:  # type: ignore[no-untyped-def]
    folder, xterm_window = xterm
    display, window = own_window
    xdotool("mousemove", "1700", "50")  # over nothing: the focus, not the pointer, decides
    xdotool("windowfocus", "--sync", xterm_window)
    guard = FocusGuard()
    guard.remember()  # the engine's frame source does this after each screenshot
    assert guard.remembered == int(xterm_window)

    window.set_input_focus(X.RevertToParent, X.CurrentTime)  # the user clicks Holodesk's window
    display.sync()
    capture = ScreenCapture()
    try:
        result = InputPerformer(X11Input(capture=capture, focus_guard=guard)).execute(
            TypeText("echo guarded > out.txt\n")
        )
    finally:
        capture.close()
    assert result.ok and "gave the keyboard focus back" in result.detail, result.detail
    deadline = time.monotonic() + 5
    out = folder / "out.txt"
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert out.read_text() == "guarded\n"
    display.sync()
    assert key_presses(display) == 0


@pytest.mark.display
def test_the_users_own_focus_choice_is_left_alone(xterm, own_window) -> None:  # type: ignore[no-untyped-def]
    _, xterm_window = xterm
    xdotool("windowfocus", "--sync", xterm_window)
    guard = FocusGuard()
    guard.remember()
    assert guard.restore() == ""  # the user's window still has the keys: nothing to do
    display, window = own_window
    window.set_input_focus(X.RevertToParent, X.CurrentTime)
    display.sync()
    guard.remember()  # a screenshot while our window has the focus does not forget the user's
    assert guard.remembered == int(xterm_window)
