"""Hotkeys on sway: a key binding in sway that runs `holodesk trigger` reaches the running Holodesk.

wlroots desktops have no GlobalShortcuts portal, so Holodesk's prompt and stop keys there are the
user's own sway bindings (`bindsym Ctrl+Alt+h exec holodesk trigger`), which `holodesk doctor` and the
tray name in words (app/common/hotkey_path.py's TRIGGER_ADVICE). Here both ends run as sway starts
programs, through `swaymsg exec`: the stand-in for the tray app (tests/support/instance_server.py,
which claims the single-instance socket as the tray does and prints what it receives) and, on the key
press, `holodesk trigger` itself, each with sway's own environment and user (as root, the stack runs
sway as nobody). So the trigger finds the instance as it would in a user's session: the same user,
WAYLAND_DISPLAY and runtime folder. The keys are pressed on a virtual keyboard (wtype), which sway
treats as a keyboard like any other, and Holodesk's doctor on sway names the binding to make.
"""

from __future__ import annotations

import os
import shlex
import signal
import stat
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from bench.rigs.sway_stack import SwayStack
from tests.automation.wlroots.test_doctor_on_sway import doctor, line

pytestmark = [pytest.mark.display, pytest.mark.wlroots]

WAIT_S = 30.0


def python_module(stack: SwayStack, module: str, *arguments: str) -> str:
    """The shell command that runs `python -m module arguments` as a program sway starts.

    As sway's own user this interpreter serves. As root, sway runs as nobody, who may not reach this
    interpreter (here it sits in root's private folder): Debian's python3 (the same 3.11) then runs the
    module with this environment's packages."""
    tail = " ".join(shlex.quote(part) for part in (module, *arguments))
    if os.geteuid() != 0:
        return f"{shlex.quote(sys.executable)} -m {tail}"
    shim = stack.root / "python-as-nobody"
    if not shim.exists():
        packages = shlex.quote(sysconfig.get_paths()["purelib"])
        run = "import runpy, site, sys; site.addsitedir(sys.argv.pop(1)); "
        run += 'runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)'
        shim.write_text(f"#!/bin/sh\nexec /usr/bin/python3 -c '{run}' {packages} \"$@\"\n")
        shim.chmod(0o755)
    return f"{shim} {tail}"


def sway_exec(stack: SwayStack, command: str) -> None:
    """Have sway start `command` (through sh), as a key binding or the session's autostart does."""
    stack.swaymsg("command", f"exec {command}")


def wait_for_line(path: Path, expected: str, timeout_s: float = WAIT_S) -> list[str]:
    """The lines of `path` once one equals or starts with `expected`; fails the test with them otherwise."""
    deadline = time.monotonic() + timeout_s
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        if any(text == expected or text.startswith(expected + " ") for text in lines):
            return lines
        time.sleep(0.05)
    pytest.fail(f"{path.name} has no line {expected!r} within {timeout_s:g} s: {lines}", pytrace=False)


def started_by(stack: SwayStack, module: str) -> list[int]:
    """The processes running `module` with this stack's sway socket in their environment (sway's children)."""
    found = []
    for folder in Path("/proc").glob("[0-9]*"):
        with suppress(OSError):
            if module.encode() in (folder / "cmdline").read_bytes() and (
                f"SWAYSOCK={stack.ipc_socket}".encode() in (folder / "environ").read_bytes().split(b"\0")
            ):
                found.append(int(folder.name))
    return found


def unreadable_by_others(paths: list[str]) -> list[str]:
    """The folders on the way to `paths` that a user other than their owner cannot enter or read."""
    blocked = []
    for path in paths:
        folder = Path(path).resolve()
        for step in [*reversed(folder.parents), folder]:
            mode = step.stat().st_mode
            if not mode & stat.S_IXOTH or (step == folder and not mode & stat.S_IROTH):
                blocked.append(str(step))
                break
    return blocked


@pytest.fixture
def running_holodesk(sway_stack: SwayStack) -> Iterator[Path]:
    """The tray app's stand-in started by sway; yields the file it prints its events to."""
    if os.geteuid() == 0:
        # sway's programs run as nobody here: they must read this checkout and its environment's packages.
        blocked = unreadable_by_others([os.getcwd(), sysconfig.get_paths()["purelib"]])
        if blocked:
            pytest.skip(
                f"as root, sway's programs run as nobody, who cannot enter {', '.join(blocked)}: "
                "run from a checkout other users can read, or as an ordinary user"
            )
    events = sway_stack.home / "instance.log"
    server = python_module(sway_stack, "tests.support.instance_server")
    sway_exec(sway_stack, f"cd {shlex.quote(os.getcwd())} && exec {server} > {events} 2>&1")
    try:
        wait_for_line(events, "listening")
        yield events
    finally:
        # It ends on "stop"; after a failed test it is killed here (sway's stop does not reach it: sway
        # starts each program in a session of its own).
        for pid in started_by(sway_stack, "tests.support.instance_server"):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def press(stack: SwayStack, *keys: str) -> None:
    """Press ctrl+alt+`keys` on a virtual keyboard (wtype), as the user presses the binding."""
    done = subprocess.run(
        [
            "wtype",
            "-M",
            "ctrl",
            "-M",
            "alt",
            *[part for key in keys for part in ("-k", key)],
            "-m",
            "alt",
            "-m",
            "ctrl",
        ],
        env=stack.env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, f"wtype failed: {done.stderr.strip()}"


def test_a_sway_binding_running_holodesk_trigger_reaches_the_running_holodesk(
    sway_stack: SwayStack, running_holodesk: Path
) -> None:
    trigger = python_module(sway_stack, "holodesk.app.cli", "trigger")
    errors = sway_stack.home / "trigger.err"
    sway_stack.swaymsg("command", f"bindsym Ctrl+Alt+h exec {trigger} 2>> {errors}")
    sway_stack.swaymsg("command", f"bindsym Ctrl+Alt+s exec {trigger} stop 2>> {errors}")
    press(sway_stack, "h")
    lines = wait_for_line(running_holodesk, "received prompt")
    assert [text for text in lines if text.startswith(("received", "refused"))] == ["received prompt"], lines
    press(sway_stack, "s")
    wait_for_line(running_holodesk, "received stop")
    assert not errors.exists() or errors.read_text() == "", errors.read_text()


def test_keys_without_a_binding_reach_no_holodesk_and_doctor_names_the_binding(
    sway_stack: SwayStack, running_holodesk: Path, tmp_path: Path
) -> None:
    """Keys sway has no binding for trigger nothing (what the test above saw came from the binding), and
    `holodesk doctor` on sway says there are no global hotkeys and how to bind them in sway."""
    press(sway_stack, "j")  # bound to nothing
    sway_exec(sway_stack, python_module(sway_stack, "holodesk.app.cli", "trigger", "show"))  # a fence
    lines = wait_for_line(running_holodesk, "received show")
    assert [text for text in lines if text.startswith("received")] == ["received show"], lines
    _, report = doctor(sway_stack, tmp_path)
    hotkeys = line(report, "hotkeys")
    assert "no global hotkeys" in hotkeys, report
    assert "sway: `bindsym Ctrl+Alt+h exec holodesk trigger` in its config" in report, report
    sway_exec(sway_stack, python_module(sway_stack, "holodesk.app.cli", "trigger", "stop"))
    wait_for_line(running_holodesk, "received stop")
