"""A folder for this user's runtime files (sockets, locks, markers) that no other user can enter.

$XDG_RUNTIME_DIR is such a folder when the session provides it. Without it, the shared temp folder
is not: another user could create our socket or lock there first and receive what is meant for us.
So we use `<temp>/holodesk-<uid>/`, created 0700, and refuse it unless it is a real folder (not a
link) that we own and that only we can enter.
"""

from __future__ import annotations

import os
import stat
import tempfile
from contextlib import suppress
from pathlib import Path

PRIVATE_MODE = 0o700


class UnsafeRuntimeDirError(OSError):
    """The runtime folder exists but another user could use it; the message names the folder and why."""


def user_runtime_dir() -> Path:
    """$XDG_RUNTIME_DIR when set (and a folder), else a private `<temp>/holodesk-<uid>` (created if needed).

    Raises UnsafeRuntimeDirError when that folder is owned by someone else, is a link, or is open to others
    and cannot be made private.
    """
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        return Path(xdg)
    if not hasattr(os, "getuid"):  # Windows: the per-user temp folder is private already
        return Path(tempfile.gettempdir())
    folder = Path(tempfile.gettempdir()) / f"holodesk-{os.getuid()}"
    with suppress(FileExistsError):
        os.mkdir(folder, PRIVATE_MODE)
    ensure_private(folder)
    return folder


def ensure_private(folder: Path) -> None:
    """Check that `folder` is ours alone (fixing its mode if only that is wrong), else UnsafeRuntimeDirError."""
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UnsafeRuntimeDirError(f"{folder} is not a plain folder (a link or a file?): remove it and start again")
    if info.st_uid != os.getuid():
        raise UnsafeRuntimeDirError(
            f"{folder} belongs to user id {info.st_uid}, not to you: another user may be trying to intercept "
            "Holodesk; remove it (or set XDG_RUNTIME_DIR) and start again"
        )
    if stat.S_IMODE(info.st_mode) != PRIVATE_MODE:
        os.chmod(folder, PRIVATE_MODE)
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            _remove_foreign_entries(folder)


def _remove_foreign_entries(folder: Path) -> None:
    """While the folder was open to others they could plant a socket or lock in it: drop what is not ours."""
    for entry in folder.iterdir():
        if entry.lstat().st_uid != os.getuid():
            entry.unlink()
