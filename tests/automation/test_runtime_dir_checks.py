"""The folder $XDG_RUNTIME_DIR names is checked like our own, and a marker that cannot be written stops the action.

Real folders with real modes and links; the markers are the real classes writing where the product does.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from holodesk.automation.held_input import (
    HeldInputMarker,
    MarkerUnavailable,
    RemappedKeysMarker,
    release_leftover_input,
)
from holodesk.automation.private_dir import UnsafeRuntimeDirError, runtime_dir_problem, user_runtime_dir


def _folder(tmp_path: Path, mode: int) -> Path:
    folder = tmp_path / f"runtime-{mode:o}"
    folder.mkdir()
    folder.chmod(mode)
    return folder


def test_a_private_xdg_runtime_dir_of_ours_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _folder(tmp_path, 0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    assert user_runtime_dir() == folder and runtime_dir_problem() is None


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o777, 0o701])
def test_an_xdg_runtime_dir_others_can_enter_is_refused_in_words_and_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    folder = _folder(tmp_path, mode)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    with pytest.raises(UnsafeRuntimeDirError, match=rf"XDG_RUNTIME_DIR names {folder}, which other users can enter"):
        user_runtime_dir()
    assert f"mode {mode:04o}, not 0700" in (runtime_dir_problem() or "")
    assert os.stat(folder).st_mode & 0o777 == mode  # the session's folder: told, not changed


def test_an_xdg_runtime_dir_that_is_a_link_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    link = tmp_path / "link"
    link.symlink_to(_folder(tmp_path, 0o700))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(link))
    assert "is a link, not a plain folder" in (runtime_dir_problem() or "")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_an_xdg_runtime_dir_of_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _folder(tmp_path, 0o700)
    os.chown(folder, 65534, 65534)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    assert "belongs to user id 65534, not to you" in (runtime_dir_problem() or "")


def test_an_unsafe_folder_stops_the_action_before_its_block_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(_folder(tmp_path, 0o755)))
    marker = HeldInputMarker(display=":99")
    ran = []
    with (
        pytest.raises(MarkerUnavailable, match="so nothing was pressed: XDG_RUNTIME_DIR names"),
        marker.holding(buttons=[1]),
    ):
        ran.append(True)
    assert ran == []
    with marker.holding():  # nothing held needs no marker, and the failed block left nothing open
        ran.append(True)
    assert ran == [True]
    with pytest.raises(MarkerUnavailable, match="so nothing was typed"):
        RemappedKeysMarker(display=":99").record({200: 0x1000FC})
    RemappedKeysMarker(display=":99").record({})  # clearing never raises: it only logs


def test_the_leftover_check_says_why_it_could_not_look(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(_folder(tmp_path, 0o777)))
    result = release_leftover_input(display=":99")
    assert result.markers == 0 and "other users can enter" in result.describe()
