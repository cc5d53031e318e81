"""A folder for this user's runtime files (sockets, locks, markers) that no other user can enter.

$XDG_RUNTIME_DIR is such a folder when the session provides it, and it is checked like our own:
a folder named by the environment is still only a name, and on a shared machine it can be one
another user made. Without it, the shared temp folder is not private: another user could create
our socket, lock or marker folder there first and receive (or hide) what is meant for us. So we use
`<temp>/holodesk-<uid>/`, created 0700.

Either folder is refused (UnsafeRuntimeDirError, in words) unless it is a real folder (not a link)
that we own and that only we can enter. Our own fallback folder left open to others is made private
again (and what others planted in it is dropped); the folder $XDG_RUNTIME_DIR names is never changed
here, since the session made it: it is refused, and the person told to fix it or unset the variable.
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
    (and, for the fallback folder, cannot be made private).
    """
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        if hasattr(os, "getuid"):
            check_session_folder(Path(xdg))
        return Path(xdg)
    if not hasattr(os, "getuid"):  # Windows: the per-user temp folder is private already
        return Path(tempfile.gettempdir())
    folder = Path(tempfile.gettempdir()) / f"holodesk-{os.getuid()}"
    with suppress(FileExistsError):
        os.mkdir(folder, PRIVATE_MODE)
    ensure_private(folder)
    return folder


def runtime_dir_problem() -> str | None:
    """Why the runtime folder cannot hold this user's markers and sockets, in words; None when it can.

    Commands that act call it before acting, so that an unsafe folder is refused before the first key.
    """
    try:
        user_runtime_dir()
    except UnsafeRuntimeDirError as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot create Holodesk's runtime folder: {exc}"
    return None


def check_session_folder(folder: Path) -> None:
    """The folder $XDG_RUNTIME_DIR names must be ours alone as it is; UnsafeRuntimeDirError otherwise."""
    info = os.lstat(folder)
    named = f"XDG_RUNTIME_DIR names {folder}, which"
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeRuntimeDirError(
            f"{named} is a link, not a plain folder: point XDG_RUNTIME_DIR at the folder itself (or unset it)"
        )
    if info.st_uid != os.getuid():
        raise UnsafeRuntimeDirError(
            f"{named} belongs to user id {info.st_uid}, not to you: another user could read or replace "
            "Holodesk's files there; set XDG_RUNTIME_DIR to your own folder (mode 0700) or unset it"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise UnsafeRuntimeDirError(
            f"{named} other users can enter (mode {stat.S_IMODE(info.st_mode):04o}, not 0700): "
            f"make it private (chmod 700 {folder}) or unset XDG_RUNTIME_DIR"
        )


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
