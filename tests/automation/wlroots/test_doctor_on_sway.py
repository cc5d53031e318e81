"""`holodesk doctor` on the headless sway: which desktop it found, which path it takes, and what works.

The command runs as a user runs it, with sway's client environment only (no DISPLAY, no
HOLODESK_BACKEND) and the loopback model server as its model, so every line about the desktop comes
from what it found on that sway. The same sway is then described as a wlroots desktop other than
sway (no IPC socket), and as an unknown compositor: both are refused in words, never reported ready.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.rigs.fake_openai_server import FakeOpenAIServer
from bench.rigs.sway_stack import SwayStack
from tests.support.holodesk_command import HOLODESK_COMMAND

pytestmark = [pytest.mark.display, pytest.mark.wlroots]


def doctor(stack: SwayStack, tmp_path: Path, *, session_bus: bool = False, **changes: str | None) -> tuple[int, str]:
    """`holodesk doctor` on the stack's sway, with `changes` to its environment (None removes), in a
    D-Bus session of its own with `session_bus`."""
    env = stack.env()
    env.pop("HOLODESK_BACKEND", None)
    env.update(
        HOLODESK_API_KEY="sk-test",
        PYTHONPATH=os.environ.get("PYTHONPATH", ""),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    with FakeOpenAIServer(api_key="sk-test") as server:
        done = subprocess.run(
            [*(("dbus-run-session", "--") if session_bus else ()), *HOLODESK_COMMAND, "doctor", "--backend",
             "remote", "--base-url", server.base_url],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def line(report: str, name: str) -> str:
    """The report's line for check `name` (the one that names it first)."""
    found = [text for text in report.splitlines() if f" {name}" in text.split(":")[0] or text.startswith(name)]
    assert found, f"no {name!r} line in:\n{report}"
    return found[0]


def test_doctor_names_sway_the_wlroots_path_and_what_works(sway_stack: SwayStack, tmp_path: Path) -> None:
    code, report = doctor(sway_stack, tmp_path)
    assert code == 0 and "FAIL" not in report, report  # sway with grim and wtype: ready
    assert "wlroots desktop (sway): capture through grim (screencopy), typing through virtual keyboards" in report, (
        report
    )
    assert "sway reports 1: HEADLESS-1 1024x768" in report, report
    assert "a 30-step task on a 1024x768 screen" in report, report  # the context check sizes sway's screen
    assert "grim found (screenshots)" in report and "wtype found (key presses)" in report, report
    # the typing line is OK only once Holodesk's own virtual keyboard was opened on that sway
    typing = line(report, "typing")
    assert typing.startswith("OK") and "text through Holodesk's own virtual keyboard" in typing, report
    # the pointer line is OK only once a virtual pointer was opened on that sway
    assert line(report, "pointer").startswith("OK") and "through a virtual pointer" in line(report, "pointer"), report
    assert "Wayland portal" not in report and "RemoteDesktop portal version" not in report, report


def test_doctor_without_pywayland_says_typing_and_the_pointer_are_refused(
    sway_stack: SwayStack, tmp_path: Path
) -> None:
    """pywayland made unimportable (a package of that name that raises first on the path): no silent OK."""
    broken = tmp_path / "broken" / "pywayland"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('pywayland removed for this test')\n")
    path = os.pathsep.join(filter(None, [str(broken.parent), os.environ.get("PYTHONPATH", "")]))
    code, report = doctor(sway_stack, tmp_path, PYTHONPATH=path)
    typing = line(report, "typing")
    assert typing.startswith("FAIL") and "needs the Python package pywayland" in typing, report
    assert "pip install pywayland" in report and line(report, "pointer").startswith("WARN"), report
    assert code != 0, report


def test_doctor_refuses_a_wlroots_desktop_that_is_not_sway(sway_stack: SwayStack, tmp_path: Path) -> None:
    code, report = doctor(sway_stack, tmp_path, SWAYSOCK=None, XDG_CURRENT_DESKTOP="Hyprland")
    assert "wlroots desktop (Hyprland)" in report, report
    assert "this wlroots desktop is not sway (SWAYSOCK is unset)" in line(report, "monitors"), report
    assert "no monitors from sway: pointer actions cannot be placed" in line(report, "pointer"), report
    assert code != 0, report


def test_doctor_refuses_an_unknown_compositor_without_a_session_bus(sway_stack: SwayStack, tmp_path: Path) -> None:
    code, report = doctor(sway_stack, tmp_path, SWAYSOCK=None, XDG_CURRENT_DESKTOP="mystery")
    assert "Wayland portal capture and input" in report and "desktop mystery" in report, report
    assert "Holodesk reaches no RemoteDesktop portal on this desktop (mystery)" in line(report, "portal"), report
    assert code != 0, report


def test_doctor_does_not_trust_another_desktops_portal_on_an_unknown_compositor(
    sway_stack: SwayStack, tmp_path: Path
) -> None:
    _, report = doctor(sway_stack, tmp_path, session_bus=True, SWAYSOCK=None, XDG_CURRENT_DESKTOP="mystery")
    portal = line(report, "portal")
    assert portal.startswith("WARN") and "RemoteDesktop portal version 1 answers, but this is desktop mystery" in portal
    assert "refuse the first task" in portal, report
