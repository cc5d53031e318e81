"""Without XDG_RUNTIME_DIR the instance socket and lock live in a private per-user folder, never bare /tmp."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodesk.app.common.instance_client import (
    INSTANCE_NAME_ENV,
    InstanceError,
    send_to_running_instance,
    server_address,
)
from holodesk.app.gui.single_instance import lock_path
from holodesk.automation.private_dir import user_runtime_dir
from tests.app.gui.test_single_instance import REPO_ROOT, InstanceProcess

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture
def bare_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh shared temp folder and no XDG_RUNTIME_DIR, as on a server login or under cron.

    Made directly under the system's temp folder, not pytest's `tmp_path`: a parallel worker's
    `tmp_path` is long enough to push the socket's path past the 107 bytes a Unix socket allows.
    """
    shared = Path(tempfile.mkdtemp(prefix="hd-"))
    shared.chmod(0o1777)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.setenv(INSTANCE_NAME_ENV, f"hd-test-{uuid.uuid4().hex[:8]}")
    yield shared
    shutil.rmtree(shared, ignore_errors=True)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_socket_goes_into_a_private_folder_even_under_umask_022(bare_tmp: Path) -> None:
    previous = os.umask(0o022)
    try:
        address = Path(server_address())
    finally:
        os.umask(previous)
    private = bare_tmp / f"holodesk-{os.getuid()}"
    assert address.parent == private
    assert _mode(private) == 0o700 and os.lstat(private).st_uid == os.getuid()
    assert Path(lock_path(str(address))).parent == private


def test_a_real_instance_listens_there_and_trigger_reaches_it(bare_tmp: Path) -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(REPO_ROOT))
    instance = InstanceProcess(env)
    try:
        instance.expect("listening ")
        assert send_to_running_instance("prompt") == "ok"
        instance.expect("received prompt")
        socket_path = Path(server_address())
        assert socket_path.parent == bare_tmp / f"holodesk-{os.getuid()}" and socket_path.is_socket()
        assert sorted(p.name for p in bare_tmp.iterdir()) == [f"holodesk-{os.getuid()}"]  # nothing loose in /tmp
    finally:
        instance.stop()


def test_a_folder_left_open_is_made_private_and_a_link_is_refused(bare_tmp: Path) -> None:
    private = bare_tmp / f"holodesk-{os.getuid()}"
    private.mkdir(mode=0o777)
    private.chmod(0o777)
    assert user_runtime_dir() == private and _mode(private) == 0o700
    private.rmdir()
    elsewhere = bare_tmp / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    private.symlink_to(elsewhere)
    with pytest.raises(InstanceError, match="not a plain folder"):
        server_address()


@pytest.mark.skipif(not ROOT, reason="making a folder another user's needs root")
def test_a_folder_owned_by_another_user_is_refused_and_what_they_planted_is_dropped(bare_tmp: Path) -> None:
    private = bare_tmp / f"holodesk-{os.getuid()}"
    private.mkdir(mode=0o700)
    os.chown(private, 65534, 65534)
    with pytest.raises(InstanceError, match="belongs to user id 65534"):
        server_address()
    os.chown(private, os.getuid(), os.getgid())
    private.chmod(0o777)
    planted = private / f"{os.environ[INSTANCE_NAME_ENV]}.sock"
    planted.write_text("")
    os.chown(planted, 65534, 65534)
    assert Path(server_address()).parent == private
    assert not planted.exists() and _mode(private) == 0o700
