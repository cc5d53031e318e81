"""sway's monitors, read from its IPC (`swaymsg -t get_outputs`): the wlroots backends' screen layout.

Other wlroots desktops have no sway IPC; they are refused in words (SWAYSOCK unset) until one of
their own ways is wired (wlr-output-management).
"""

from __future__ import annotations

import json
import os
import subprocess

from holodesk.automation.coords import Monitor, Rect
from holodesk.automation.errors import ExecutionError


def sway_monitors(environ: dict[str, str] | None = None) -> tuple[Monitor, ...]:
    """sway's active outputs as monitors (`swaymsg -t get_outputs`); ExecutionError in words elsewhere."""
    env = dict(os.environ if environ is None else environ)
    if not env.get("SWAYSOCK"):
        raise ExecutionError(
            "this wlroots desktop is not sway (SWAYSOCK is unset): Holodesk reads the monitors only from sway so far"
        )
    try:
        done = subprocess.run(
            ["swaymsg", "--raw", "-t", "get_outputs"], env=env, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExecutionError(f"cannot ask sway for its monitors: {exc}") from exc
    if done.returncode != 0:
        raise ExecutionError(f"cannot ask sway for its monitors: {done.stderr.strip() or done.stdout.strip()}")
    outputs = [output for output in json.loads(done.stdout) if output.get("active")]
    return tuple(
        Monitor(
            index,
            Rect(rect["x"], rect["y"], rect["width"], rect["height"]),
            float(output.get("scale", 1.0)),
            str(output.get("name", "")),
            index == 1,
        )
        for index, output in enumerate(outputs, start=1)
        for rect in (output["rect"],)
    )
