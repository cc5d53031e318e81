"""kitty or alacritty (Debian's packages) on the test's Xvfb, running `cat > file`: the file is what the terminal sent.

xterm and urxvt (rxvt-unicode) run the same way for the freeze tests (tests/automation/test_typing_freeze.py).

The terminal's own program is `sh -c 'exec cat > received.txt'`: every key the terminal passes on,
escape sequences included (kitty's keyboard protocol turns a shortcut it does not take as its own into
`ESC[...u`), reaches the file once Enter ends the line, and a paste arrives as its text. The file is
created by the shell before cat starts, so its existence says the terminal's program runs.

Both draw with OpenGL. On Xvfb, Mesa's GLX finds no DRI device and loads swrast_dri.so (llvmpipe)
by itself (Debian 12, Mesa 22.3.6: kitty 0.26.5 gets GL 4.5 core, and alacritty 0.11.0 starts, with
no extra setting; seen with LIBGL_DEBUG=verbose); LIBGL_ALWAYS_SOFTWARE=1 is set anyway, so a machine
whose X server has a GPU driver renders the same way. kitty runs with `--config NONE` and alacritty
with an empty configuration file, so a user's settings do not change the keys; both are kept on X11
(no WAYLAND_DISPLAY, alacritty's winit told by WINIT_UNIX_BACKEND).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.waiting import wait_until

START_WAIT_S = 60.0
RECEIVED = "received.txt"


@dataclass
class GlTerminal:
    """A running kitty or alacritty window (`window_id`) whose program writes what it got to `received`."""

    program: str
    process: subprocess.Popen[bytes]
    window_id: int
    received: Path

    def focus(self) -> None:
        subprocess.run(["xdotool", "windowfocus", "--sync", str(self.window_id)], check=True, timeout=20)

    def text(self) -> str:
        return self.received.read_text(encoding="utf-8", errors="replace") if self.received.exists() else ""

    def added(self, expected: str, since: int, timeout_s: float = 20.0) -> str:
        """What the program received after the first `since` characters, once it equals `expected`
        (bounded: whatever came by then otherwise)."""
        with suppress(AssertionError):
            wait_until(lambda: self.text()[since:] == expected, timeout_s, f"{self.program} receiving {expected!r}")
        return self.text()[since:]

    def pause(self) -> None:
        """Stop the terminal's process (SIGSTOP): it reads no X event until `resume`, as a loaded machine's may not."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)


def _command(program: str, folder: Path) -> list[str]:
    run = ["sh", "-c", f"exec cat > {RECEIVED}"]
    if program == "kitty":
        return ["kitty", "--config", "NONE", "-o", "linux_display_server=x11", "--directory", str(folder), *run]
    if program == "alacritty":
        config = folder / "alacritty.yml"
        config.write_text("")
        return ["alacritty", "--config-file", str(config), "--working-directory", str(folder), "-e", *run]
    if program == "xterm":
        return ["xterm", "-u8", "-e", *run]
    if program == "urxvt":
        return ["urxvt", "-e", *run]
    raise ValueError(f"not a terminal of these tests: {program!r}")


@contextmanager
def gl_terminal(program: str, folder: Path) -> Iterator[GlTerminal]:
    """Start `program` (kitty, alacritty, xterm or urxvt) running `cat > received.txt` in `folder`; stop it
    after the block."""
    if shutil.which(program) is None:
        package = {"urxvt": "rxvt-unicode"}.get(program, program)
        pytest.fail(f"{program} is not installed (Debian: apt install {package})", pytrace=False)
    env = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "LIBGL_ALWAYS_SOFTWARE": "1"}
    env["WINIT_UNIX_BACKEND"] = "x11"
    env.pop("WAYLAND_DISPLAY", None)
    log = (folder / f"{program}.log").open("wb")
    process = subprocess.Popen(_command(program, folder), cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        found = subprocess.run(
            ["xdotool", "search", "--sync", "--onlyvisible", "--pid", str(process.pid)],
            check=True,
            timeout=START_WAIT_S,
            capture_output=True,
            text=True,
        )
        received = folder / RECEIVED
        wait_until(received.exists, START_WAIT_S, f"the program in {program} starting")
        terminal = GlTerminal(program, process, int(found.stdout.split()[0]), received)
        terminal.focus()
        yield terminal
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)  # a paused terminal cannot act on SIGTERM
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        log.close()
