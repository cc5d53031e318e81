"""Trajectories: durable appends, readable after a crash, corrections export, retention."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from holodesk.automation.coords import Monitor, Rect
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.trajectory import (
    MAX_PENDING_SCREENSHOTS,
    SCREENSHOT_DIR,
    SESSION_FILE,
    TrajectoryWriteError,
    TrajectoryWriter,
    export_corrections,
    iter_session_folders,
    prune_sessions,
    read_session,
)
from tests.automation.frames import solid_frame


def _step(index: int, **extra):
    return {"type": "step", "index": index, "decision": "approve", **extra}


def test_steps_are_on_disk_before_the_writer_is_closed(tmp_path):
    writer = TrajectoryWriter.create(tmp_path, "Archive the newsletters")
    shot = writer.save_screenshot("step-0001", solid_frame(64, 48, (10, 200, 30))).result()
    writer.append(_step(1, screenshot=shot))
    # Read while the writer is still open: appends are flushed as they happen.
    session = read_session(writer.folder)
    assert session.task == "Archive the newsletters"
    assert [s["index"] for s in session.steps] == [1]
    assert session.outcome == "unfinished"
    with Image.open(writer.folder / shot) as image:
        assert image.size == (64, 48)
        assert image.getpixel((5, 5)) == (10, 200, 30)
    writer.finish("done", "archived 3")
    assert read_session(writer.folder).outcome == "done"


def test_session_folder_names_sort_by_time_and_name_the_task(tmp_path):
    writer = TrajectoryWriter.create(tmp_path, "Open Settings / Display!")
    writer.close()
    assert "open-settings-display" in writer.folder.name
    assert list(iter_session_folders(tmp_path)) == [writer.folder]


def test_a_cut_off_last_line_is_skipped_with_a_warning(tmp_path):
    writer = TrajectoryWriter(tmp_path / "s", "task")
    writer.append(_step(1))
    writer.append(_step(2))
    writer.close()
    with open(tmp_path / "s" / SESSION_FILE, "a", encoding="utf-8") as handle:
        handle.write('{"type": "step", "index": 3, "raw_te')  # the process died mid-write
    session = read_session(tmp_path / "s")
    assert [s["index"] for s in session.steps] == [1, 2]
    assert len(session.warnings) == 1 and "cut-off last line" in session.warnings[0]


def test_a_corrupt_middle_line_does_not_hide_the_lines_after_it(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    lines = [json.dumps({"type": "session", "task": "t"}), "{not json", json.dumps(_step(2)), ""]
    (folder / SESSION_FILE).write_text("\n".join(lines), encoding="utf-8")
    session = read_session(folder)
    assert [s["index"] for s in session.steps] == [2]
    assert "corrupt line" in session.warnings[0]


def test_a_writer_killed_mid_session_leaves_every_finished_step(tmp_path):
    # A real process appends steps and is killed with SIGKILL; everything it had appended is there.
    script = textwrap.dedent(
        f"""
        import os, sys, time
        sys.path.insert(0, {str(Path.cwd())!r})
        from holodesk.automation.trajectory import TrajectoryWriter
        from pathlib import Path
        writer = TrajectoryWriter(Path({str(tmp_path / "killed")!r}), "task")
        for index in range(1, 6):
            writer.append({{"type": "step", "index": index}})
        # Lines written after an action are flushed, not fsynced: a killed process still leaves them.
        writer.append({{"type": "step", "index": 6}}, sync=False)
        print("written", flush=True)
        time.sleep(60)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "written"
    finally:
        process.kill()
        process.wait()
    session = read_session(tmp_path / "killed")
    assert [s["index"] for s in session.steps] == [1, 2, 3, 4, 5, 6]
    assert session.outcome == "unfinished"
    assert not session.warnings


def test_corrections_export_only_moved_targets_in_image_pixels(tmp_path):
    writer = TrajectoryWriter(tmp_path / "a-session", "Rename the file")
    region = {"left": -1920, "top": 0, "width": 1920, "height": 1080}
    for name in ("step-0001", "step-0002"):
        writer.save_screenshot(name, solid_frame(64, 48))
    writer.append(
        _step(
            1,
            decision="edit",
            region=region,
            screenshot="screenshots/step-0001.png",
            note="the Rename button",
            action_screen={"kind": "click", "at": [-1000, 500]},
            edited_screen={"kind": "click", "at": [-990, 510]},
        )
    )
    # An edit that only changed the text is not a grounding correction.
    writer.append(
        _step(
            2,
            decision="edit",
            region=region,
            screenshot="screenshots/step-0002.png",
            action_screen={"kind": "type", "text": "a", "at": [-5, 5]},
            edited_screen={"kind": "type", "text": "b", "at": [-5, 5]},
        )
    )
    writer.append(_step(3, region=region, action_screen={"kind": "click", "at": [1, 1]}))
    writer.close()
    out = tmp_path / "corrections.jsonl"
    assert export_corrections(tmp_path, out) == 1
    (record,) = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert record["point"] == [930, 510]
    assert record["proposed"] == [-1000, 500]
    assert record["instruction"] == "the Rename button"
    assert record["image"].endswith("a-session/screenshots/step-0001.png")


def test_a_corrections_instruction_is_the_models_description_of_the_target(tmp_path):
    writer = TrajectoryWriter(tmp_path / "a-session", "Send the mail")
    region = {"left": 0, "top": 0, "width": 800, "height": 600}
    writer.save_screenshot("step-0001", solid_frame(64, 48))
    writer.append(
        _step(
            1,
            decision="edit",
            region=region,
            screenshot="screenshots/step-0001.png",
            element="Blue 'Send' button, bottom right",
            note="The draft is ready.",
            action_screen={"kind": "click", "at": [700, 560]},
            edited_screen={"kind": "click", "at": [720, 570]},
        )
    )
    writer.close()
    out = tmp_path / "corrections.jsonl"
    assert export_corrections(tmp_path, out) == 1
    (record,) = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert (record["instruction"], record["point"]) == ("Blue 'Send' button, bottom right", [720, 570])


def test_retention_removes_the_oldest_sessions_first_and_keeps_the_newest(tmp_path):
    for name in ("20260101-000000-a", "20260102-000000-b", "20260103-000000-c"):
        writer = TrajectoryWriter(tmp_path / name, name)
        (writer.folder / "screenshots" / "big.png").write_bytes(os.urandom(10_000))
        writer.close()
    removed = prune_sessions(tmp_path, max_bytes=25_000)
    assert [p.name for p in removed] == ["20260101-000000-a"]
    removed = prune_sessions(tmp_path, max_bytes=0)
    assert [p.name for p in removed] == ["20260102-000000-b"]
    assert [p.name for p in iter_session_folders(tmp_path)] == ["20260103-000000-c"]


def noise_frame(width: int, height: int, seed: int = 0) -> ScreenFrame:
    """Random pixels: PNG cannot compress them, so encoding takes a while (a fraction of a second at 4000x3000)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 4), dtype=np.uint8)
    rect = Rect(0, 0, width, height)
    monitor = Monitor(1, rect)
    return ScreenFrame(pixels, rect, monitor, (monitor,), captured_at=0.0)


def test_a_missing_or_cut_off_screenshot_is_reported_by_the_reader_not_a_crash(tmp_path):
    writer = TrajectoryWriter(tmp_path / "s", "task")
    for index in (1, 2, 3):
        writer.begin_step(_step(index), solid_frame(64, 48)).close()
    writer.close()
    screenshots = tmp_path / "s" / SCREENSHOT_DIR
    (screenshots / "step-0002.png").unlink()
    whole = (screenshots / "step-0003.png").read_bytes()
    (screenshots / "step-0003.png").write_bytes(whole[: len(whole) // 2])
    session = read_session(tmp_path / "s")
    assert [s["index"] for s in session.steps] == [1, 2, 3]
    assert "screenshot_error" not in session.steps[0]
    assert session.steps[1]["screenshot_error"].startswith("screenshots/step-0002.png is missing")
    assert session.steps[2]["screenshot_error"].startswith("screenshots/step-0003.png is cut off")
    assert len(session.warnings) == 2
    assert "step 2's screenshot is missing" in session.warnings[0]


def test_a_process_killed_while_a_png_is_encoded_leaves_a_readable_session(tmp_path):
    # A real writer process writes a step that never acts (the final answer: its line does not wait
    # for the PNG) while its (large) PNG is still being encoded, and is killed with SIGKILL right then.
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path.cwd())!r})
        from pathlib import Path
        from tests.automation.test_trajectory import noise_frame
        from holodesk.automation.trajectory import TrajectoryWriter
        writer = TrajectoryWriter(Path({str(tmp_path / "killed")!r}), "task")
        step = writer.begin_step({{"type": "step", "index": 1, "decision": "final"}}, noise_frame(4000, 3000))
        step.close()
        print("written", flush=True)
        sys.stdin.read()
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "written"
    finally:
        process.kill()
        process.wait()
    session = read_session(tmp_path / "killed")
    (step,) = session.steps
    assert step["decision"] == "final" and step["screenshot"] == "screenshots/step-0001.png"
    assert "is missing" in step["screenshot_error"]
    assert any("step 1's screenshot is missing" in warning for warning in session.warnings)
    assert not (tmp_path / "killed" / step["screenshot"]).exists()  # never a half-written PNG under its name


def test_encoding_that_falls_behind_makes_the_next_screenshot_wait_instead_of_piling_up(tmp_path):
    writer = TrajectoryWriter(tmp_path / "s", "task")
    taken = [writer.save_screenshot(f"step-{n:04d}", noise_frame(2000, 1500, n)) for n in range(3)]
    # Only MAX_PENDING_SCREENSHOTS may wait at once: taking the third waited for the first.
    assert MAX_PENDING_SCREENSHOTS == 2
    assert taken[0].done()
    assert not taken[2].done()
    writer.confirm_screenshots()
    assert all(screenshot.done() for screenshot in taken)
    writer.close()


def test_a_screenshot_that_could_not_be_written_is_reported_once_in_words(tmp_path):
    writer = TrajectoryWriter(tmp_path / "s", "task")
    first = writer.save_screenshot("step-0001", solid_frame(64, 48))
    writer.confirm_screenshots()
    assert first.result() == "screenshots/step-0001.png"
    shutil.rmtree(tmp_path / "s" / SCREENSHOT_DIR)  # the user (or a cleaner) removes the folder mid-run
    writer.save_screenshot("step-0002", solid_frame(64, 48))
    with pytest.raises(TrajectoryWriteError, match=r"cannot record the session in .*screenshots: No such file"):
        writer.confirm_screenshots()
    writer.confirm_screenshots()  # reported once
    writer.close()
