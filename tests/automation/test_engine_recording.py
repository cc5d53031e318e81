"""The engine's records under faults: written ahead of each action, private, and loud when the disk fails."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import stat
import threading
import time

from holodesk.automation.actions import Click, Done, Point, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import ImagePixelSpace
from holodesk.automation.engine_protocols import EngineEvent, EngineState, Outcome
from holodesk.automation.proposal import Grounding, Proposal, RejectedAnswer
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.trajectory import (
    SCREENSHOT_DIR,
    SESSION_FILE,
    TrajectoryWriteError,
    check_writable,
    iter_session_folders,
    read_session,
)
from tests.automation.test_engine import (
    WAIT_S,
    FakeScreen,
    ListPolicy,
    RecordingPerformer,
    ScriptedApprover,
    make_engine,
    wait_for_event,
)


class DiskPeekingPerformer(RecordingPerformer):
    """Reads the session back from disk at the moment each action starts, as a crash would leave it."""

    def __init__(self, root) -> None:
        super().__init__()
        self.root = root
        self.seen_on_disk: list[list[dict]] = []

    def execute(self, action, cancel: CancelToken) -> object:
        (folder,) = iter_session_folders(self.root)
        self.seen_on_disk.append(read_session(folder).steps)
        return super().execute(action, cancel)


def test_each_step_is_on_disk_before_its_action_and_paired_with_its_result_after(tmp_path):
    policy = ListPolicy([Click(Point(100, 50)), TypeText("hi", Point(10, 10)), Done("ok")])
    performer = DiskPeekingPerformer(tmp_path)
    engine, _, _ = make_engine(policy, ScriptedApprover(), performer, tmp_path=tmp_path)
    result = engine.run("click and type")
    assert result.outcome is Outcome.DONE

    # While the click ran, its step was already on disk: had the process died then, it would read as interrupted.
    during_click = performer.seen_on_disk[0]
    assert [s["index"] for s in during_click] == [1]
    assert during_click[0]["decision"] == "approve"
    assert during_click[0]["action_screen"]["kind"] == "click"
    assert during_click[0]["interrupted"] is True
    assert (tmp_path / during_click[0]["screenshot"]).name.endswith(".png")
    during_typing = performer.seen_on_disk[1]
    assert [s.get("interrupted", False) for s in during_typing] == [False, True]

    session = read_session(result.folder)
    assert [s["index"] for s in session.steps] == [1, 2, 3]
    assert not session.interrupted_steps and not session.warnings
    assert all(s["result"]["ok"] for s in session.steps[:2])
    assert "result_pending" not in session.steps[0]


def test_a_session_folder_that_cannot_be_created_is_reported_before_anything_runs(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the sessions folder should be")
    policy = ListPolicy([Click(Point(1, 1)), Done()])
    engine, performer, events = make_engine(policy, ScriptedApprover(), tmp_path=blocker / "sessions")
    started = time.perf_counter()
    result = engine.run("click")
    elapsed = time.perf_counter() - started
    assert result.outcome is Outcome.ERROR
    assert "cannot record the session" in result.detail and "Not a directory" in result.detail
    assert performer.executed == [] and policy.calls == []
    assert events[-1].state is EngineState.FINISHED  # a tray app hears that the run ended
    assert elapsed < 0.5
    print(f"\nsessions folder under a file: the run ended with the reason after {elapsed * 1000:.1f} ms, nothing done")
    try:
        check_writable(blocker / "sessions")
    except TrajectoryWriteError as exc:
        assert "Not a directory" in str(exc)
    else:
        raise AssertionError("check_writable accepted a path under a file")


class GatedFrame(ScreenFrame):
    """A frame whose PNG encoding blocks until `gate` is set: a disk exactly as slow as the test wants."""

    gate: threading.Event

    def to_image(self):
        assert self.gate.wait(WAIT_S), "the test never opened the PNG gate"
        return super().to_image()


def gated(frame: ScreenFrame, gate: threading.Event) -> GatedFrame:
    copy = GatedFrame(frame.pixels, frame.region, frame.monitor, frame.monitors, frame.captured_at)
    object.__setattr__(copy, "gate", gate)  # ScreenFrame is frozen
    return copy


class GatedScreen(FakeScreen):
    """A FakeScreen whose frames (from the moment `gating` is set) encode only once `gate` opens."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gating = True

    def grab(self, monitor: int | None) -> ScreenFrame:
        frame = super().grab(monitor)
        return gated(frame, self.gate) if self.gating else frame


def finished(engine, events: list[EngineEvent]):
    """The run's result, once its thread has ended (bounded)."""
    thread = engine._thread
    thread.join(WAIT_S)
    assert not thread.is_alive(), "the run did not end"
    assert events[-1].state is EngineState.FINISHED
    return events[-1].result


def with_gated_screen(engine) -> GatedScreen:
    screen = GatedScreen()
    engine.frames = screen
    engine.performer.screen = screen
    return screen


class SlowingPerformer(RecordingPerformer):
    """From the first action on, the screenshots taken are slow to write (gated by the test)."""

    def execute(self, action, cancel: CancelToken) -> object:
        self.screen.gating = True
        return super().execute(action, cancel)


def test_a_screenshot_that_cannot_be_written_stops_the_run_before_the_next_action(tmp_path):
    policy = ListPolicy([Click(Point(1, 1)), Click(Point(2, 2)), Click(Point(3, 3)), Done()])
    performer = SlowingPerformer()
    engine, _, events = make_engine(policy, ScriptedApprover(), performer, tmp_path=tmp_path)
    screen = with_gated_screen(engine)
    screen.gating = False  # step 1's screenshot is written as fast as it can be
    engine.start("click thrice")
    # Step 2 is approved and waits for its screenshot, still being encoded on a slow disk: however
    # long that takes, its click waits for the verdict.
    wait_for_event(events, EngineState.SAVING, 2)
    assert performer.executed == [Click(Point(1, 1))]
    # Then the user (or a cleaner) removes the screenshots folder, and the PNG cannot be written.
    shutil.rmtree(result_folder(tmp_path) / SCREENSHOT_DIR)
    screen.gate.set()
    result = finished(engine, events)
    assert result.outcome is Outcome.ERROR
    assert "cannot record the session" in result.detail and "the run was stopped" in result.detail
    assert performer.executed == [Click(Point(1, 1))]  # the second click never ran unrecorded
    session = read_session(result.folder)
    # The second step's line says it was not performed, and why; the reader says the PNGs are missing.
    assert [s["index"] for s in session.steps] == [1, 2]
    assert session.steps[0]["result"]["ok"] is True
    assert session.steps[1]["result"]["ok"] is False
    assert session.steps[1]["result"]["detail"].startswith("not performed: cannot record the session")
    assert all("is missing" in s["screenshot_error"] for s in session.steps)
    assert session.end is not None and session.end["outcome"] == "error"


def result_folder(root):
    (folder,) = iter_session_folders(root)
    return folder


def test_a_screenshot_that_is_never_written_stops_the_run_at_the_bound_without_acting(tmp_path):
    policy = ListPolicy([Click(Point(1, 1)), Done()])
    engine, performer, events = make_engine(policy, ScriptedApprover(), tmp_path=tmp_path, screenshot_wait_s=0.5)
    screen = with_gated_screen(engine)  # a disk that never finishes the step's PNG
    try:
        engine.start("click")
        result = finished(engine, events)
    finally:
        screen.gate.set()  # let the encoder thread end
    assert performer.executed == []
    assert result.outcome is Outcome.ERROR
    assert "screenshots/step-0001.png was not written within 0.5 s" in result.detail
    assert "the run was stopped so that no step goes unrecorded" in result.detail
    assert [e.state for e in events if e.step == 1][-2:] == [EngineState.WAITING_APPROVAL, EngineState.SAVING]
    session = read_session(result.folder)
    (step,) = session.steps
    assert step["decision"] == "approve" and "interrupted" not in step
    assert step["result"]["detail"].startswith("not performed: cannot record the session")


def test_a_stop_while_the_screenshot_is_saved_ends_the_run_without_acting(tmp_path):
    policy = ListPolicy([Click(Point(1, 1)), Done()])
    engine, performer, events = make_engine(policy, ScriptedApprover(), tmp_path=tmp_path)
    screen = with_gated_screen(engine)
    try:
        engine.start("click")
        wait_for_event(events, EngineState.SAVING, 1)
        engine.stop()
        screen.gate.set()  # the PNG arrives after the stop: the action must still not run
        result = finished(engine, events)
    finally:
        screen.gate.set()
    assert performer.executed == []
    assert (result.outcome, result.detail) == (Outcome.STOPPED, "stopped by the user")
    session = read_session(result.folder)
    assert session.steps[0]["result"] == {"ok": False, "detail": "not performed: stopped by the user"}


class FileSizeLimitingPerformer(RecordingPerformer):
    """During the first action the session file stops being able to grow (EFBIG, like a full quota)."""

    def __init__(self, root) -> None:
        super().__init__()
        self.root = root
        self.fault_at = 0.0

    def execute(self, action, cancel: CancelToken) -> object:
        if not self.executed:
            (folder,) = iter_session_folders(self.root)
            size = (folder / SESSION_FILE).stat().st_size
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
            self.fault_at = time.perf_counter()
        return super().execute(action, cancel)


def test_a_session_file_that_cannot_grow_stops_the_run_with_a_clear_message(tmp_path):
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process
    try:
        policy = ListPolicy([Click(Point(1, 1)), Click(Point(2, 2)), Done()])
        performer = FileSizeLimitingPerformer(tmp_path)
        engine, _, _ = make_engine(policy, ScriptedApprover(), performer, tmp_path=tmp_path)
        result = engine.run("click twice")
        time_to_error = time.perf_counter() - performer.fault_at
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, previous)
    assert result.outcome is Outcome.ERROR
    assert "cannot record the session" in result.detail and "too large" in result.detail.lower()
    assert performer.executed == [Click(Point(1, 1))]
    session = read_session(result.folder)
    # The first step was written ahead; its result could not be: it reads as interrupted, not lost.
    assert [s["index"] for s in session.steps] == [1] and session.steps[0]["interrupted"]
    print(f"\nsession file stopped growing mid-run: run stopped {time_to_error * 1000:.0f} ms after the fault")


def test_sessions_are_private_under_the_usual_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        policy = ListPolicy([Click(Point(1, 1)), Done()])
        engine, _, _ = make_engine(policy, ScriptedApprover(), tmp_path=tmp_path / "sessions")
        result = engine.run("click")
    finally:
        os.umask(previous)
    folder = result.folder
    assert folder is not None

    def mode(path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(tmp_path / "sessions") == 0o700
    assert mode(folder) == 0o700 and mode(folder / SCREENSHOT_DIR) == 0o700
    files = [folder / SESSION_FILE, *(folder / SCREENSHOT_DIR).iterdir()]
    assert len(files) == 3
    assert {path.name: mode(path) for path in files} == {path.name: 0o600 for path in files}


def test_an_existing_sessions_root_keeps_its_mode_and_each_session_is_private(tmp_path):
    root = tmp_path / "chosen-by-the-user"
    root.mkdir()
    root.chmod(0o755)
    policy = ListPolicy([Done()])
    engine, _, _ = make_engine(policy, ScriptedApprover(), tmp_path=root)
    result = engine.run("nothing")
    assert stat.S_IMODE(root.stat().st_mode) == 0o755  # not ours to change (it could be the home folder)
    assert result.folder is not None and stat.S_IMODE(result.folder.stat().st_mode) == 0o700


class PngWatchingPerformer(RecordingPerformer):
    """Notes, as each action starts, whether its step is on disk and whether its PNG is there yet."""

    def __init__(self, root) -> None:
        super().__init__()
        self.root = root
        self.seen: list[tuple[list[dict], bool]] = []

    def execute(self, action, cancel: CancelToken) -> object:
        (folder,) = iter_session_folders(self.root)
        steps = read_session(folder).steps
        self.seen.append((steps, (folder / steps[-1]["screenshot"]).is_file()))
        return super().execute(action, cancel)


def test_a_step_acts_only_once_its_png_is_on_disk_and_says_so_while_it_waits(tmp_path):
    policy = ListPolicy([Click(Point(100, 50)), Done()])
    performer = PngWatchingPerformer(tmp_path)
    engine, _, events = make_engine(policy, ScriptedApprover(), performer, tmp_path=tmp_path)
    screen = with_gated_screen(engine)
    engine.start("click")
    wait_for_event(events, EngineState.SAVING, 1)  # approved, the PNG still held back
    assert performer.executed == []
    screen.gate.set()
    result = finished(engine, events)
    assert result.outcome is Outcome.DONE
    ((steps, png_written),) = performer.seen
    assert steps[0]["interrupted"] is True and steps[0]["screenshot"] == "screenshots/step-0001.png"
    assert png_written  # the action ran with its screenshot already on disk
    session = read_session(result.folder)
    assert not session.warnings
    assert all((result.folder / s["screenshot"]).is_file() for s in session.steps)


class LateFolderRemovingPerformer(RecordingPerformer):
    """Removes the screenshots folder during the run's last action (no later action would notice)."""

    def __init__(self, root) -> None:
        super().__init__()
        self.root = root

    def execute(self, action, cancel: CancelToken) -> object:
        (folder,) = iter_session_folders(self.root)
        shutil.rmtree(folder / SCREENSHOT_DIR)
        return super().execute(action, cancel)


def test_a_screenshot_that_cannot_be_written_at_the_end_of_a_run_is_an_error_in_words(tmp_path):
    policy = ListPolicy([Click(Point(1, 1)), Done("all done")])
    performer = LateFolderRemovingPerformer(tmp_path)
    engine, _, events = make_engine(policy, ScriptedApprover(), performer, tmp_path=tmp_path)
    result = engine.run("click once")
    assert performer.executed == [Click(Point(1, 1))]
    assert result.outcome is Outcome.ERROR
    assert "cannot record the session" in result.detail and "No such file" in result.detail
    assert "the run had ended (done: all done) but its record is incomplete" in result.detail
    assert events[-1].result == result
    session = read_session(result.folder)
    assert session.end is not None and session.end["outcome"] == "error"
    assert "is missing" in session.steps[-1]["screenshot_error"]


class ProposalPolicy:
    """Gives back the proposals it was handed, in order (the metadata a routine or a retry adds)."""

    def __init__(self, *proposals: Proposal) -> None:
        self.proposals = list(proposals)

    def propose(self, task, history, frames, cancel) -> Proposal:
        return self.proposals.pop(0)

    def interrupt(self) -> None:
        pass


def test_a_step_record_names_its_picture_settings_and_everything_the_proposal_said(tmp_path):
    grounding = Grounding(exact=True, how="found on its picture", source="routine 'r', step 1 of 1", record={"k": 7})
    click = Proposal(
        Click(Point(100, 50)),
        "raw click",
        800,
        600,
        note="the note",
        thought="the thought",
        space=ImagePixelSpace(),
        element="the blue button",
        rejected=(RejectedAnswer("garbled", "no action in it"),),
        grounding=grounding,
        task_asked="the task as asked",
    )
    policy = ProposalPolicy(click, Proposal(Done("ok"), "raw done", 800, 600, space=ImagePixelSpace()))
    engine, _, _ = make_engine(policy, ScriptedApprover(), tmp_path=tmp_path, max_steps=5, session_meta={"who": "t"})
    result = engine.run("click it")
    assert result.outcome is Outcome.DONE

    session = read_session(result.folder)
    assert session.header["settings"] == {
        "max_steps": 5,
        "monitor": 1,
        "history_steps": 10,
        "keep_screenshots": 3,
        "who": "t",
    }
    step = session.steps[0]
    frame = engine.frames.frame
    assert step["region"] == {
        "left": frame.region.left,
        "top": frame.region.top,
        "width": frame.region.width,
        "height": frame.region.height,
    }
    assert [(m["index"], m["left"], m["width"], m["height"], m["scale"]) for m in step["monitors"]] == [
        (m.index, m.rect.left, m.rect.width, m.rect.height, m.scale) for m in frame.monitors
    ]
    assert (step["raw_text"], step["note"], step["thought"]) == ("raw click", "the note", "the thought")
    assert step["action_model"] == Click(Point(100, 50)).to_dict()
    assert step["image_size"] == [800, 600]
    assert (step["element"], step["task_asked"]) == ("the blue button", "the task as asked")
    assert step["rejected_answers"] == [{"raw_text": "garbled", "error": "no action in it"}]
    assert step["grounding"] == {
        "source": "routine 'r', step 1 of 1",
        "how": "found on its picture",
        "exact": True,
        "k": 7,
    }
    # A proposal without them records none of the optional keys.
    assert not {"element", "task_asked", "rejected_answers", "grounding"} & session.steps[1].keys()


def test_a_run_may_hand_its_records_closing_to_be_done_after_it_returns(tmp_path):
    handed: list = []
    policy = ListPolicy([Click(Point(1, 1)), Done("all done")])
    engine, performer, events = make_engine(
        policy, ScriptedApprover(), tmp_path=tmp_path, close_record_later=handed.append
    )
    result = engine.run("click once")
    assert performer.executed == [Click(Point(1, 1))]
    assert (result.outcome, result.detail) == (Outcome.DONE, "all done")
    assert events[-1].state is EngineState.FINISHED and events[-1].result == result
    (close,) = handed
    session = read_session(result.folder)
    assert session.end is None  # the end line waits for the closing
    assert session.steps[0]["result"]["ok"]  # the step that acted is whole already
    close()
    session = read_session(result.folder)
    assert session.end is not None and (session.end["outcome"], session.end["steps"]) == ("done", 1)
    assert all((result.folder / step["screenshot"]).is_file() for step in session.steps)


def test_a_closing_handed_over_says_in_words_and_on_disk_when_the_record_is_incomplete(tmp_path):
    handed: list = []
    policy = ListPolicy([Click(Point(1, 1)), Done("all done")])
    performer = LateFolderRemovingPerformer(tmp_path)
    engine, _, _ = make_engine(
        policy, ScriptedApprover(), performer, tmp_path=tmp_path, close_record_later=handed.append
    )
    result = engine.run("click once")
    assert result.outcome is Outcome.DONE
    (close,) = handed
    try:
        close()
        raise AssertionError("an incomplete record was closed without a word")
    except TrajectoryWriteError as exc:
        assert "cannot record the session" in str(exc) and "No such file" in str(exc)
    session = read_session(result.folder)
    assert session.end is not None and session.end["outcome"] == "error"
    assert "the run had ended (done: all done) but its record is incomplete" in session.end["detail"]
