"""bash in an xterm for desktop tests: its environment, and a bounded wait until it shows its prompt.

bash runs PROMPT_COMMAND just before it prints each prompt; here that touches a file, so a test can
wait for the shell to be ready instead of sleeping for a time a loaded machine may not keep.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.waiting import wait_until

PROMPTED = ".prompted"
PROMPT_WAIT_S = 60.0


def shell_env(folder: Path) -> dict[str, str]:
    """The environment for `xterm -e bash --norc --noprofile` working in `folder` (UTF-8, a plain prompt)."""
    return {
        **os.environ,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(folder),
        "PS1": "$ ",
        "PROMPT_COMMAND": f"touch {folder / PROMPTED}",
    }


def wait_for_prompt(folder: Path) -> None:
    """Wait (bounded) until the shell started with `shell_env(folder)` has printed its prompt."""
    wait_until((folder / PROMPTED).exists, PROMPT_WAIT_S, "bash in xterm printing its prompt")


def history_lines(history: Path) -> list[str]:
    """The lines bash ran, as `bash_in_xterm` keeps them (appended before each prompt)."""
    return history.read_text(encoding="utf-8").splitlines() if history.exists() else []


@contextmanager
def bash_in_xterm(folder: Path, origin: tuple[int, int], size: str = "80x10") -> Iterator[Path]:
    """bash in an xterm at `origin` on $DISPLAY, ready at its prompt; yields the file bash appends each
    line it ran to before its next prompt. Bracketed paste is off (an older bash, or another shell), so
    a pasted newline runs the line."""
    if shutil.which("xterm") is None:
        raise AssertionError("xterm is not installed (Debian: apt install xterm)")
    (folder / "inputrc").write_text("set enable-bracketed-paste off\n")
    history = folder / "history"
    env = {
        **shell_env(folder),
        "INPUTRC": str(folder / "inputrc"),
        "HISTFILE": str(history),
        "PROMPT_COMMAND": f"history -a; touch {folder / PROMPTED}",
    }
    process = subprocess.Popen(
        ["xterm", "-u8", "-geometry", f"{size}+{origin[0]}+{origin[1]}", "-e", "bash", "--norc", "--noprofile"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_prompt(folder)
        yield history
    finally:
        process.terminate()
        process.wait(timeout=10)
