"""bash in an xterm for desktop tests: its environment, and a bounded wait until it shows its prompt.

bash runs PROMPT_COMMAND just before it prints each prompt; here that touches a file, so a test can
wait for the shell to be ready instead of sleeping for a time a loaded machine may not keep.
"""

from __future__ import annotations

import os
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
