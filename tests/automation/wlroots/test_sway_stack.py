"""The headless sway stack itself: its refusal in words, its output, and a clean stop."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from bench.rigs.sway_stack import StackError, SwayStack
from tests.support.waiting import wait_until


def test_missing_sway_is_refused_naming_the_debian_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no sway on it
    stack = SwayStack()
    with pytest.raises(StackError, match=r"needs sway: apt-get install sway"):
        stack.start()
    stack.stop()
    assert not stack.root.exists()


@pytest.mark.display
@pytest.mark.wlroots
def test_the_stack_has_one_output_of_the_asked_size_and_stops_clean() -> None:
    stack = SwayStack(output_size=(800, 600))
    try:
        stack.start()
        sway = stack.pid
        assert sway is not None
        outputs = stack.swaymsg("get_outputs")
        assert isinstance(outputs, list)
        assert [(o["name"], o["rect"]["width"], o["rect"]["height"]) for o in outputs] == [("HEADLESS-1", 800, 600)]
        runtime = Path(stack.env()["XDG_RUNTIME_DIR"])
        assert runtime.stat().st_mode & 0o777 == 0o700
        assert runtime.stat().st_uid == os.geteuid()  # the clients' own folder, not sway's
        frame = subprocess.run(["grim", "-"], env=stack.env(), capture_output=True, timeout=20, check=True).stdout
        assert Image.open(io.BytesIO(frame)).size == (800, 600)
        assert stack.swaymsg("get_bar_config") == []  # no bar
    finally:
        stack.stop()
    assert not Path(f"/proc/{sway}").exists(), "sway still runs after stop()"
    assert not stack.root.exists()


def group_members(group: int) -> list[int]:
    """The running (not zombie) processes whose process group is `group`."""
    members = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = status.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] != "Z":
                members.append(int(status.parent.name))
    return members


@pytest.mark.display
@pytest.mark.wlroots
def test_stop_ends_xwayland_and_every_helper_of_sways_group() -> None:
    stack = SwayStack(xwayland=True)
    stack.start()
    try:
        stack.x_display()
        group = stack.pid
        assert group is not None and len(group_members(group)) >= 2  # sway and what it started for XWayland
    finally:
        stack.stop()
    wait_until(lambda: group_members(group) == [], 5.0, "every process of sway's group ending")
