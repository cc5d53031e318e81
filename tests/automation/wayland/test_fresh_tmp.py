"""The GNOME stack on a machine that never ran an X server: no /tmp/.X11-unix.

mutter 43 refuses to start XWayland when that folder is missing (it makes one with the wrong mode, then
says "Directory /tmp/.X11-unix is not writable"), so the whole GNOME tier failed on a fresh machine
and passed on any machine where an earlier Xvfb had made it. The stack now makes the folder as
systemd-tmpfiles does. The end-to-end test starts the stack with XWayland in a private mount
namespace whose /tmp is empty (unshare -m, as root), which is how a fresh machine looks; the unit
tests check what is refused without changing anything.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bench.rigs.gnome_stack import X11_SOCKET_MODE, StackError, ensure_x11_socket_folder
from tests.conftest import REPO

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a root-owned folder and a mount namespace need root")

# Started in the private namespace: the stack with XWayland, then what the folder became.
_START_IN_EMPTY_TMP = """
import os, stat
from bench.rigs.gnome_stack import GnomeStack
assert not os.path.exists("/tmp/.X11-unix"), "this /tmp is not empty"
with GnomeStack(xwayland=True) as stack:
    found = os.lstat("/tmp/.X11-unix")
    print("display", stack.x_display, "owner", found.st_uid, "mode", oct(stat.S_IMODE(found.st_mode)))
"""


@needs_root
@pytest.mark.display
@pytest.mark.wayland
def test_the_stack_starts_xwayland_on_an_empty_tmp() -> None:
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is missing: the fresh-/tmp check cannot run", pytrace=False)
    script = f"mount -t tmpfs tmpfs /tmp && exec {sys.executable} -c '{_START_IN_EMPTY_TMP}'"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, f"the stack did not start on an empty /tmp:\n{done.stdout}\n{done.stderr[-3000:]}"
    assert "owner 0 mode 0o1777" in done.stdout, done.stdout
    assert "display :" in done.stdout, done.stdout


@needs_root
def test_a_missing_folder_is_made_root_owned_1777(tmp_path: Path) -> None:
    folder = tmp_path / ".X11-unix"
    old_umask = os.umask(0o022)  # the mode must not depend on the caller's umask
    try:
        ensure_x11_socket_folder(folder)
    finally:
        os.umask(old_umask)
    found = folder.lstat()
    assert stat.S_ISDIR(found.st_mode)
    assert (found.st_uid, stat.S_IMODE(found.st_mode)) == (0, X11_SOCKET_MODE)
    ensure_x11_socket_folder(folder)  # one that is right is used as it is


def test_a_folder_with_another_mode_is_refused_in_words_and_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / ".X11-unix"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    with pytest.raises(StackError, match=r"mode 755; XWayland needs it root-owned with mode 1777: sudo "):
        ensure_x11_socket_folder(folder)
    assert stat.S_IMODE(folder.lstat().st_mode) == 0o755


def test_a_link_in_its_place_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    elsewhere.chmod(0o1777)
    (tmp_path / ".X11-unix").symlink_to(elsewhere)
    with pytest.raises(StackError, match="is not a folder"):
        ensure_x11_socket_folder(tmp_path / ".X11-unix")
