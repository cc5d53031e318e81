"""`holodesk locate`, `history` and `export-corrections`, run as commands."""

from __future__ import annotations

import json
import os
import subprocess

from PIL import Image

from holodesk.automation.actions import AskUser, Click, Done, Point, TypeText
from holodesk.automation.trajectory import TrajectoryWriter
from tests.automation.frames import solid_frame
from tests.support.holodesk_command import HOLODESK_COMMAND


def holodesk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOLODESK_COMMAND, *args], capture_output=True, text=True, timeout=120)


def script(tmp_path, *answers: str):
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    return str(path)


def test_locate_prints_the_point_in_the_images_own_pixels(tmp_path):
    image = tmp_path / "shot.png"
    Image.new("RGB", (1366, 768), (200, 200, 200)).save(image)
    answers = script(tmp_path, '{"x": 500, "y": 250}')
    result = holodesk("locate", str(image), "the Save button", "--backend", "scripted", "--script", answers)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert (found["x"], found["y"]) == (683, 192)  # 500/1000 of 1366, 250/1000 of 768
    assert found["model_point"] == [500, 250]


def test_locate_with_a_pixel_profile_maps_back_from_the_resized_image(tmp_path):
    image = tmp_path / "shot.png"
    Image.new("RGB", (1920, 1080), (200, 200, 200)).save(image)
    # holo1.5 sees the screenshot resized to 1316x728; (658, 364) is its centre.
    answers = script(tmp_path, '{"action": "click_absolute", "x": 658, "y": 364}')
    result = holodesk(
        "locate", str(image), "the centre", "--backend", "scripted", "--script", answers, "--profile", "holo1.5"
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert abs(found["x"] - 960) <= 2 and abs(found["y"] - 540) <= 2


def test_locate_with_an_unusable_answer_exits_1_and_shows_it(tmp_path):
    image = tmp_path / "shot.png"
    Image.new("RGB", (64, 64)).save(image)
    answers = script(tmp_path, "I think it is somewhere on the left")
    result = holodesk("locate", str(image), "x", "--backend", "scripted", "--script", answers)
    assert result.returncode == 1
    assert "unusable" in result.stderr and "somewhere on the left" in result.stderr
    assert result.stdout == ""


def test_locate_never_prints_the_models_control_characters_raw(tmp_path):
    """A terminal acts on escape sequences: the model's text is shown escaped, never raw."""
    image = tmp_path / "shot.png"
    Image.new("RGB", (64, 64)).save(image)
    answers = script(tmp_path, "left\x1b]0;owned\x07 side\x1b[2J")
    result = holodesk("locate", str(image), "x", "--backend", "scripted", "--script", answers)
    assert result.returncode == 1
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "left" in result.stderr and "owned" in result.stderr  # shown, escaped


def test_locate_with_an_unreadable_image_exits_2(tmp_path):
    bad = tmp_path / "shot.png"
    bad.write_text("not an image", encoding="utf-8")
    result = holodesk("locate", str(bad), "x", "--backend", "scripted", "--script", script(tmp_path, "{}"))
    assert result.returncode == 2 and "cannot read the image" in result.stderr


def record(root, task: str, edited: bool) -> str:
    writer = TrajectoryWriter.create(root, task)
    shot = writer.save_screenshot("step-0001", solid_frame(200, 100)).result()
    step = {
        "type": "step",
        "index": 1,
        "decision": "edit" if edited else "approve",
        "screenshot": shot,
        "region": {"left": 0, "top": 0, "width": 200, "height": 100},
        "note": "the Save button",
        "action_screen": Click(Point(10, 10)).to_dict(),
        "action_text": "click at (10, 10)",
    }
    if edited:
        step["edited_screen"] = Click(Point(40, 30)).to_dict()
    writer.append(step)
    writer.finish("done", "saved")
    return writer.folder.name


def test_history_lists_and_shows_sessions(tmp_path):
    first = record(tmp_path, "Save the file", edited=False)
    record(tmp_path, "Rename the file", edited=True)
    listing = holodesk("history", "--sessions", str(tmp_path))
    assert listing.returncode == 0
    header, *lines = listing.stdout.splitlines()
    assert header.split() == ["STARTED", "OUTCOME", "STEPS", "TASK", "SESSION"]
    assert "Rename the file" in lines[0] and "Save the file" in lines[1]  # newest first
    # An aligned table: every column starts at the same place on every line.
    for column in ("OUTCOME", "TASK", "SESSION"):
        start = header.index(column)
        assert all(line[start - 2 : start] == "  " and line[start] != " " for line in lines), listing.stdout
    assert all(" done " in line and " 1  " in line for line in lines)
    shown = holodesk("history", first[:20], "--sessions", str(tmp_path))
    assert shown.returncode == 0, shown.stdout
    assert "task:     Save the file" in shown.stdout and "outcome:  done, 1 step taken" in shown.stdout
    assert "approved  click at (10, 10)" in shown.stdout
    as_json = json.loads(holodesk("history", first, "--json", "--sessions", str(tmp_path)).stdout)
    assert as_json["end"]["outcome"] == "done"
    missing = holodesk("history", "no-such-session", "--sessions", str(tmp_path))
    assert missing.returncode == 2  # a bad argument, as the README and --help say
    assert "no session matches 'no-such-session'" in missing.stderr and not missing.stdout


def test_history_shows_what_actually_ran_the_result_in_words_and_timings(tmp_path):
    writer = TrajectoryWriter.create(tmp_path, "Type a greeting")
    writer.append(
        {
            "type": "step",
            "index": 1,
            "decision": "edit",
            "action_screen": TypeText("echo hello from holodesk").to_dict(),
            "edited_screen": TypeText("echo bye").to_dict(),
            "timings": {"total_s": 2.5, "tokens_in": 1234},
            "result": {"ok": True, "detail": "typed with key events", "duration_s": 0.125},
        }
    )
    writer.append(
        {
            "type": "step",
            "index": 2,
            "decision": "answered",
            "action_model": AskUser("Which \x1b[2Jname?").to_dict(),
            "reply": "Ada",
        }
    )
    writer.append({"type": "step", "index": 3, "decision": "final", "action_model": Done("greeted").to_dict()})
    writer.finish("done", "greeted", steps=2)
    shown = holodesk("history", writer.folder.name, "--sessions", str(tmp_path)).stdout
    step_1, step_2, step_3 = (line for line in shown.splitlines() if line.strip()[:1] in "123" and "  " in line)
    assert "edited" in step_1 and "type 'echo bye'" in step_1 and "proposed: type 'echo hello" in step_1
    assert "ok: typed with key events" in step_1 and "model 2.5 s, 1,234 tokens in · action 0.12 s" in step_1
    assert "answered" in step_2 and "asked: Which \\x1b[2Jname?" in step_2 and "you replied: Ada" in step_2
    assert "\x1b" not in shown  # the model's escape sequence is shown, not sent to the terminal
    assert "finished" in step_3 and "greeted" in step_3 and "final" not in step_3
    assert "outcome:  done, 2 steps taken" in shown


def test_export_corrections_says_what_is_wrong_with_its_folders(tmp_path):
    missing = holodesk("export-corrections", str(tmp_path / "no" / "out.jsonl"), "--sessions", str(tmp_path))
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    no_sessions = holodesk("export-corrections", str(tmp_path / "out.jsonl"), "--sessions", str(tmp_path / "gone"))
    assert no_sessions.returncode == 2 and "no sessions folder" in no_sessions.stderr
    record(tmp_path / "sessions", "Save the file", edited=False)
    none = holodesk("export-corrections", str(tmp_path / "out.jsonl"), "--sessions", str(tmp_path / "sessions"))
    assert none.returncode == 0 and "wrote 0 corrections" in none.stdout
    assert "warning: none of the 1 session" in none.stderr


def test_export_corrections_writes_the_moved_targets(tmp_path):
    record(tmp_path / "sessions", "Save the file", edited=False)
    record(tmp_path / "sessions", "Rename the file", edited=True)
    out = tmp_path / "corrections.jsonl"
    result = holodesk("export-corrections", str(out), "--sessions", str(tmp_path / "sessions"))
    assert result.returncode == 0 and "wrote 1 correction" in result.stdout
    (row,) = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert row["point"] == [40, 30] and row["instruction"] == "the Save button"
    assert os.stat(out).st_mode & 0o777 == 0o600  # private, as the sessions it comes from


def test_export_corrections_is_private_even_over_a_leftover_part_file(tmp_path):
    record(tmp_path / "sessions", "Rename the file", edited=True)
    out = tmp_path / "corrections.jsonl"
    leftover = tmp_path / "corrections.jsonl.part"
    leftover.write_text("half", encoding="utf-8")
    leftover.chmod(0o644)
    assert holodesk("export-corrections", str(out), "--sessions", str(tmp_path / "sessions")).returncode == 0
    assert os.stat(out).st_mode & 0o777 == 0o600


def test_doctor_and_history_follow_the_settings_file(tmp_path):
    """The same settings.toml as the tray app: doctor checks its backend, history reads its session folder."""
    import os

    config = tmp_path / "config" / "holodesk"
    config.mkdir(parents=True)
    sessions = tmp_path / "my-sessions"
    (config / "settings.toml").write_text(
        f'version = 1\n[model]\nbackend = "remote"\n[model.remote]\nbase_url = "http://127.0.0.1:9/v1"\n'
        f'[sessions]\nfolder = "{sessions}"\n',
        encoding="utf-8",
    )
    # A terminal wide enough for the task's whole text (a parallel worker's pytest sets COLUMNS to 80).
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "DISPLAY": "", "COLUMNS": "160"}
    doctor = subprocess.run([*HOLODESK_COMMAND, "doctor"], capture_output=True, text=True, timeout=120, env=env)
    assert "holodesk doctor: backend remote" in doctor.stdout, doctor.stdout + doctor.stderr
    assert "127.0.0.1:9" in doctor.stdout  # the server it checked is the file's

    writer = TrajectoryWriter.create(sessions, "from the settings' folder")
    writer.finish("done")
    history = subprocess.run([*HOLODESK_COMMAND, "history"], capture_output=True, text=True, timeout=60, env=env)
    assert history.returncode == 0 and "from the settings' folder" in history.stdout, history.stdout + history.stderr


def test_an_ambiguous_session_prefix_lists_the_matches(tmp_path):
    names = [record(tmp_path, f"Task {n}", edited=False) for n in range(3)]
    prefix = names[0][:4]  # the year: every session starts with it
    result = holodesk("history", prefix, "--sessions", str(tmp_path))
    assert result.returncode == 2
    assert f"3 sessions start with {prefix!r}; give more of the name:" in result.stderr
    assert all(f"  {name}\n" in result.stderr for name in names)


def test_history_into_a_pipe_whose_reader_is_gone_is_not_an_error(tmp_path):
    """`holodesk history | head -2`: the reader stops early. Here it is gone before the first write."""
    record(tmp_path, "Save the file", edited=False)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [*HOLODESK_COMMAND, "history", "--sessions", str(tmp_path)],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert result.returncode == 0
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr, result.stderr


def test_version_and_the_tray_apps_own_flags():
    version = holodesk("--version")
    assert version.returncode == 0 and version.stdout.startswith("holodesk ")
    # The tray app takes the model flags too; a remote backend without a URL is refused in words.
    no_url = holodesk("--backend", "remote")
    assert no_url.returncode == 2
    assert "model.remote.base_url" in no_url.stderr and "pass --base-url" in no_url.stderr
    misplaced = holodesk("--backend", "remote", "history")
    assert misplaced.returncode == 2 and "after the command" in misplaced.stderr
