"""While a step waits for approval, Enter and Esc belong to Holodesk: the focused xterm never gets them.

The real panel and GuiApprover run in tests/support/overlay_probe.py on the module's Xvfb; bash runs
in a real xterm under the pointer (X's focus follows the pointer without a window manager) with a
command typed but not run. `xdotool key Return` must approve the step, and the command must not run.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodesk.app.gui.key_grab import ANSWER_KEYSYMS, KeyGrab
from tests.support.line_process import LineProcess
from tests.support.overlay_probe import OverlayProbe
from tests.support.waiting import wait_until
from tests.support.xterm_shell import shell_env, wait_for_prompt

XTERM_ORIGIN = (600, 400)  # away from where the panel appears (top left, for a target bottom right)


def xdotool(*args: str) -> str:
    return subprocess.run(["xdotool", *args], check=True, timeout=20, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def xterm(xvfb, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if shutil.which("xterm") is None:
        pytest.fail("xterm is not installed (Debian: apt install xterm)", pytrace=False)
    folder = tmp_path_factory.mktemp("grab")
    env = shell_env(folder)
    process = subprocess.Popen(
        ["xterm", "-geometry", f"80x10+{XTERM_ORIGIN[0]}+{XTERM_ORIGIN[1]}", "-e", "bash", "--norc", "--noprofile"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        xdotool("search", "--sync", "--onlyvisible", "--pid", str(process.pid))
        wait_for_prompt(folder)
        yield folder
    finally:
        process.terminate()
        process.wait(timeout=10)


def focus_xterm() -> None:
    xdotool("mousemove", str(XTERM_ORIGIN[0] + 40), str(XTERM_ORIGIN[1] + 40))


@pytest.mark.display
@pytest.mark.parametrize("key", ["Return", "Escape"])
def test_the_answer_key_answers_the_panel_and_never_reaches_the_focused_xterm(xterm: Path, key: str) -> None:
    marker = xterm / f"ran-{key}"
    focus_xterm()
    xdotool("type", f"touch {marker.name}")  # typed, not run: a stray Return would run it
    probe = OverlayProbe.start()
    try:
        probe.send({"cmd": "decide", "step": 1, "action": {"kind": "click", "at": [1500, 900]}, "note": "n"})
        probe.wait_for("panel")
        xdotool("key", key)
        decided = probe.wait_for("decided")
        assert decided["decision"] == ("approve" if key == "Return" else "stop")
        assert decided["panel_visible"] is False
    finally:
        probe.close()
    time.sleep(0.5)
    assert not marker.exists(), f"the {key} reached the xterm"
    # Once the decision is made the keys are the user's again: the same key now reaches the xterm.
    xdotool("key", "Return")
    deadline = time.monotonic() + 5
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the xterm never got its keys back"


@pytest.mark.display
def test_the_grab_calls_back_on_release_and_gives_the_keys_back(xterm: Path) -> None:
    seen: list[str] = []
    grab = KeyGrab(ANSWER_KEYSYMS, seen.append)
    assert grab.start()
    try:
        focus_xterm()
        xdotool("key", "Escape", "KP_Enter", "shift+Return")  # Shift+Enter is not an answer key
        deadline = time.monotonic() + 3
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert seen == ["esc", "enter"]
    finally:
        grab.stop()
    assert not grab.active
    second = KeyGrab({"enter": ("Return",)}, seen.append)  # the keys are free again: another grab succeeds
    assert second.start()
    second.stop()


@pytest.mark.display
def test_the_prompt_hotkey_fires_and_leaves_nothing_in_the_focused_xterm(xterm: Path) -> None:
    probe = LineProcess("tests.support.hotkey_probe", "<ctrl>+<alt>+h")
    try:
        # Generous bounds: a loaded machine is slow, and only a failure waits this long.
        assert probe.next(60) == "ready"
        focus_xterm()
        xdotool("type", "echo one two > hotkey.txt")
        xdotool("key", "ctrl+alt+h")  # in xterm this would insert a character (or delete a word)
        assert probe.next(30) == "prompt"
        xdotool("key", "Return")
    finally:
        probe.close()
    out = xterm / "hotkey.txt"
    wait_until(lambda: out.exists() and out.read_bytes().endswith(b"\n"), 30, f"{out} written")
    assert out.read_text() == "one two\n"
