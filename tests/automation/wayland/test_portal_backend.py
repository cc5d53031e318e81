"""The Wayland backend end to end on a real compositor (headless mutter + the GNOME portal).

The test answers the portal's permission dialog with mutter's own pointer (bench.rigs.gnome_stack
.answer_consent), then drives a native Wayland Qt window only through Holodesk's WaylandCapture and
InputPerformer: the frame shows the window, a click lands on the pixel asked for, typed text
arrives (by keysym where the layout has every character, else pasted, and the result says which),
a cancelled action stops. Refusing the dialog gives the clear refusal message.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from bench.rigs.gnome_stack import MONITOR_SIZE, GnomeStack, answer_consent
from bench.rigs.mutter_remote import MutterRemote
from holodesk.automation.actions import Click, HoldAndTap, KeyCombo, Point, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.clipboard import XCLIP
from holodesk.automation.errors import ActionError, Cancelled, CaptureError, ExecutionError
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.portal.backend import PortalInput
from holodesk.automation.wayland.capture import WaylandCapture
from holodesk.automation.wayland.session import (
    ASKS_EVERY_RUN,
    CONSENT_EXPLANATION,
    CONSENT_REFUSED,
    RestoreTokenStore,
    WaylandSession,
)
from tests.automation.wayland.conftest import CONSENT_TIMEOUT_S, WaylandTarget, start_with_answer
from tests.support.input_conformance import CASES, FENCE, Case, Field, run_case
from tests.support.pointer_conformance import (
    FENCE_OFFSET,
    POINTER_CASES,
    PointerCase,
    PointerWindow,
    run_pointer_case,
)
from tests.support.user_clipboard import serve_user_text
from tests.support.wayland_target import PAD_COLOUR

pytestmark = pytest.mark.display  # every test here starts a display or a desktop stack

# Debian 12's portal (1.16) has RemoteDesktop version 1: it cannot remember the choice.
EXPLANATION = CONSENT_EXPLANATION + ASKS_EVERY_RUN.format(version=1)
KEYS_LOG = "holodesk.automation.input.portal.backend"  # where how the keys went is logged


def test_refusing_the_dialog_says_so(gnome_stack: GnomeStack, mutter_remote: MutterRemote, tmp_path: Path) -> None:
    notices: list[str] = []
    refused = WaylandSession(RestoreTokenStore(tmp_path / "token"), notices.append, consent_timeout_s=CONSENT_TIMEOUT_S)
    error = start_with_answer(refused, lambda: answer_consent(mutter_remote, share=False))
    assert isinstance(error, CaptureError)
    assert str(error) == CONSENT_REFUSED
    assert notices == [EXPLANATION, CONSENT_REFUSED]
    assert "asks at every run" in notices[0]
    assert not refused.is_started
    assert not (tmp_path / "token").exists()


def test_capture_shows_the_native_wayland_window(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    wayland, notices = session
    assert notices == [EXPLANATION]  # explained before the dialog, nothing else to report
    capture = WaylandCapture(wayland)
    (monitor,) = capture.monitors()
    assert (monitor.rect.left, monitor.rect.top, monitor.rect.width, monitor.rect.height) == (0, 0, *MONITOR_SIZE)
    assert monitor.scale == 1.0
    left, top, width, height = wayland_target.ready["layout"]["pad"]
    deadline = time.monotonic() + 10
    while True:
        frame = capture.grab(1)
        corners = [(left + 2, top + 2), (left + width - 3, top + height - 3)]
        outside = (left - 3, top - 3)
        if all(frame.pixel_rgb(x, y) == PAD_COLOUR for x, y in corners) and frame.pixel_rgb(*outside) != PAD_COLOUR:
            break
        seen = frame.pixel_rgb(left + 2, top + 2)
        assert time.monotonic() < deadline, f"the pad never showed at {left},{top}: {seen}"
        time.sleep(0.1)
    assert frame.region == monitor.rect
    desktop = capture.grab(None)
    assert desktop.monitor is None and desktop.pixel_rgb(left + 2, top + 2) == PAD_COLOUR


def test_click_lands_on_the_pixel(session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget) -> None:
    wayland, _ = session
    wayland_target.settle_input(wayland)
    input_performer = InputPerformer(PortalInput(wayland))
    left, top, _, _ = wayland_target.ready["layout"]["pad"]
    wayland_target.drain()
    for x, y in ((left + 37, top + 21), (left + 250, top + 199)):
        result = input_performer.execute(Click(Point(x, y)))
        assert result.ok, result.detail
        press = wayland_target.wait_for("press", 5.0)
        assert (press["x"], press["y"], press["widget"], press["button"]) == (x, y, "pad", "LeftButton")


def type_into_field(input_performer: InputPerformer, target: WaylandTarget, text: str) -> str:
    """Empty the field, type `text`; the step's result text."""
    left, top, width, height = target.ready["layout"]["field"]
    target.drain()
    # Select all first so each test starts from an empty field whatever the last one left.
    assert input_performer.execute(Click(Point(left + width // 2, top + height // 2))).ok
    assert input_performer.execute(KeyCombo(("ctrl", "a"))).ok
    assert input_performer.execute(KeyCombo(("backspace",))).ok
    if not text:
        return ""
    result = input_performer.execute(TypeText(text))
    assert result.ok, result.detail
    return result.detail


def test_typed_ascii_text_arrives_exactly(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget, caplog: pytest.LogCaptureFixture
) -> None:
    wayland, _ = session
    text = "Hello, World! <a href='x'>|~`^{}</a> 100% @home #1 zy ZY"
    with caplog.at_level(logging.INFO, logger=KEYS_LOG):
        detail = type_into_field(InputPerformer(PortalInput(wayland)), wayland_target, text)
    wayland_target.wait_for("text", 10.0, text=text)
    assert caplog.records[-1].getMessage() == "typed by keycode"  # one layout: every key is known
    assert detail == TypeText(text).describe(), detail  # the result in words; how the keys went is the log's


def test_text_the_layout_lacks_is_pasted_and_the_result_says_so(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    """Mutter drops keysyms its layout (US here) lacks; the text goes through XWayland's clipboard."""
    wayland, _ = session
    serve_user_text("the user's own clipboard")
    text = "Grüße — 東京"
    detail = type_into_field(InputPerformer(PortalInput(wayland)), wayland_target, text)
    wayland_target.wait_for("text", 5.0, text=text)
    assert "pasted through the clipboard with ctrl+v" in detail, detail
    assert "(English (US)) has no key for 'ü', 'ß', '—', '東', '京'" in detail, detail
    assert XCLIP.read_text() == "the user's own clipboard"  # put back after the paste


def test_untypable_text_with_no_clipboard_is_refused_before_anything_is_sent(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland))
    type_into_field(input_performer, wayland_target, "kept")
    wayland_target.wait_for("text", 5.0, text="kept")
    monkeypatch.delenv("DISPLAY")  # no XWayland to carry a clipboard, and no wl-clipboard installed
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ActionError, match=r"\(English \(US\)\) has no key for 'é', and pasting it is not possible"):
        input_performer.validate(TypeText("café"))
    with pytest.raises(ActionError, match="install xclip"):
        input_performer.execute(TypeText("café"))
    time.sleep(0.3)
    assert [r for r in wayland_target.drain() if r["event"] == "text"] == []


def test_a_key_the_layout_lacks_is_refused(session: tuple[WaylandSession, list[str]]) -> None:
    wayland, _ = session
    # The US layout's F13 key sends XF86Tools, not F13: mutter would drop an F13 keysym silently.
    with pytest.raises(ActionError, match=r"the key 'f13' is not on the desktop's keyboard layout \(English \(US\)\)"):
        InputPerformer(PortalInput(wayland)).validate(KeyCombo(("shift", "f13")))


def test_a_stop_stops_typing(session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget) -> None:
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland, key_interval_s=0.02))
    type_into_field(input_performer, wayland_target, "start:")
    wayland_target.wait_for("text", 10.0, text="start:")
    cancel = CancelToken()
    timer = threading.Timer(0.5, cancel.cancel)
    timer.start()
    with pytest.raises(Cancelled):
        input_performer.execute(TypeText("x" * 400), cancel)
    time.sleep(0.5)
    typed = [record["text"] for record in wayland_target.drain() if record["event"] == "text"]
    assert typed, "nothing was typed before the stop"
    final = typed[-1]
    assert final.startswith("start:x") and set(final[6:]) == {"x"}, final
    assert len(final) - 6 < 200, f"typing did not stop: {len(final) - 6} characters"


def _field_with(input_performer: InputPerformer, target: WaylandTarget, text: str) -> None:
    type_into_field(input_performer, target, text)
    target.wait_for("text", 10.0, text=text)


def test_overwrite_is_refused_before_anything_is_sent_as_the_focused_program_is_unknown(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    # Wayland does not say which program has the focus: in a terminal ctrl+a would not select the
    # line, so overwrite is refused in words (with Enter too: the next test) and the field keeps its text.
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland))
    _field_with(input_performer, wayland_target, "old text")
    with pytest.raises(ActionError, match="cannot see which program has the keyboard focus"):
        input_performer.validate(TypeText("new", overwrite=True))
    with pytest.raises(ActionError, match="cannot see which program has the keyboard focus"):
        input_performer.execute(TypeText("new", overwrite=True))
    input_performer.execute(TypeText("!"))
    wayland_target.wait_for("text", 10.0, text="old text!")  # nothing was selected, nothing replaced


def test_press_enter_presses_enter_after_the_text_and_alone_for_an_empty_text(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland))
    _field_with(input_performer, wayland_target, "")
    result = input_performer.execute(TypeText("sent", press_enter=True))
    assert result.ok, result.detail
    wayland_target.wait_for("enter", 10.0, text="sent")
    assert result.detail.endswith("; pressed enter"), result.detail
    alone = input_performer.execute(TypeText("", press_enter=True))
    assert alone.ok and alone.detail.startswith("press Enter"), alone.detail
    wayland_target.wait_for("enter", 10.0, text="sent")


def test_a_repeated_key_is_pressed_that_many_times(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland))
    _field_with(input_performer, wayland_target, "abcdef")
    result = input_performer.execute(KeyCombo(("backspace",), repeat=3))
    assert result.ok, result.detail
    wayland_target.wait_for("text", 10.0, text="abc")
    assert "3 times" in result.detail
    input_performer.execute(TypeText("!"))
    wayland_target.wait_for("text", 10.0, text="abc!")  # not "ab!" or "a!": exactly three


def test_hold_and_tap_holds_shift_while_the_taps_select(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland))
    _field_with(input_performer, wayland_target, "abcdef")
    result = input_performer.execute(HoldAndTap(("shift",), ("left", "left")))
    assert result.ok, result.detail
    input_performer.execute(TypeText("X"))  # replaces the selection: the two taps were made with shift held
    wayland_target.wait_for("text", 10.0, text="abcdX")


def test_overwrite_with_enter_is_refused_before_anything_is_sent(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland))
    _field_with(input_performer, wayland_target, "pending")
    with pytest.raises(ActionError, match=r"overwrite is refused here.*Enter would run it"):
        input_performer.validate(TypeText("replaced", overwrite=True, press_enter=True))
    with pytest.raises(ActionError, match="terminal"):
        input_performer.execute(TypeText("replaced", overwrite=True, press_enter=True))
    input_performer.execute(TypeText("!"))
    records = [r for r in wayland_target.drain() if r["event"] in ("text", "enter")]
    deadline = time.monotonic() + 10
    while not any(r.get("text") == "pending!" for r in records) and time.monotonic() < deadline:
        records += [r for r in wayland_target.drain() if r["event"] in ("text", "enter")]
        time.sleep(0.05)
    # Only the "!" typed afterwards arrived: no select-all, no text, no Enter from the refused step.
    assert [r for r in records if r["event"] == "text"] == [{"event": "text", "text": "pending!"}]
    assert not [r for r in records if r["event"] == "enter"]


def test_doctor_names_the_portal_backend_without_a_dialog(gnome_stack: GnomeStack) -> None:
    from holodesk.app.cli.doctor_desktop import check_desktop_backend, check_display
    from holodesk.app.cli.doctor_report import Status

    display = check_display()
    assert display.status is not Status.FAIL, display.detail
    results = {result.name: result for result in check_desktop_backend(display)}
    assert results["backend"].status is Status.OK
    assert "Wayland portal" in results["backend"].detail
    assert "WAYLAND_DISPLAY=wayland-holodesk" in results["backend"].detail
    assert results["gstreamer"].status is Status.OK
    assert results["portal"].status is Status.OK
    assert "RemoteDesktop portal version 1" in results["portal"].detail  # Debian 12's portal 1.16
    assert "holodesk trigger" in results["hotkeys"].fix


def test_settling_after_input_sees_its_effect(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    """The engine's settle check right after an action must not settle on the picture from before it.

    Mutter delivers the frame showing typed text some 100 ms later, and also sends frames identical
    to the one before; without the capture's wait for a changed post-input picture, two quick grabs of
    the old picture would look settled. The caret does not blink here, so no picture changes but by
    the input; the wait's bound is generous (the product's 0.5 s is a loaded machine's to exceed).
    """
    from holodesk.automation.screen_change import wait_for_settle

    wayland, _ = session
    capture = WaylandCapture(wayland, input_frame_wait_s=3.0)
    input_performer = InputPerformer(PortalInput(wayland))
    left, top, width, height = wayland_target.ready["layout"]["field"]
    wayland_target.process.send("caret steady")
    wayland_target.wait_for("caret", 10.0, blinking=False)
    try:
        type_into_field(input_performer, wayland_target, "")
        for text in ("W", "WW", "WWW"):
            before, _ = wait_for_settle(lambda: capture.grab(1), 2.0, 0.05)
            assert input_performer.execute(TypeText("W")).ok
            after, settled = wait_for_settle(lambda: capture.grab(1), 2.0, 0.01)
            assert settled
            field_before = before.pixels[top : top + height, left : left + width]
            field_after = after.pixels[top : top + height, left : left + width]
            assert not np.array_equal(field_before, field_after), f"the settled frame does not show {text!r} yet"
            wayland_target.wait_for("text", 5.0, text=text)
    finally:
        wayland_target.process.send("caret blinking")
        wayland_target.wait_for("caret", 10.0, blinking=True)


def test_the_engine_runs_a_scripted_task_through_the_portal(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget, tmp_path: Path
) -> None:
    """The unchanged engine (parsing, mapping, settle, trajectory) on the Wayland frame source and input_performer."""
    from holodesk.automation.coords import Rect
    from holodesk.automation.engine import StepEngine
    from holodesk.automation.engine_protocols import ApprovalDecision, EngineSettings, Outcome
    from holodesk.inference.model_policy import ModelPolicy
    from holodesk.inference.profiles import get_profile
    from holodesk.inference.scripted import ScriptedBackend
    from tests.e2e.scripting import holotron, model_point

    wayland, _ = session
    screen = Rect(0, 0, *MONITOR_SIZE)
    fl, ft, fw, fh = wayland_target.ready["layout"]["field"]
    pl, pt, pw, ph = wayland_target.ready["layout"]["pad"]
    field = model_point(Point(fl + fw // 2, ft + fh // 2), screen)
    pad = model_point(Point(pl + pw // 2, pt + ph // 2), screen)
    answers = [
        holotron("click_desktop", x=field.x, y=field.y),
        holotron("hotkey_desktop", keys=["ctrl", "a"]),
        holotron("write_desktop", content="typed by the engine"),
        holotron("click_desktop", x=pad.x, y=pad.y),
        holotron("answer", content="done"),
    ]

    class Approve:
        def decide(self, request: object) -> ApprovalDecision:
            return ApprovalDecision.approve()

    engine = StepEngine(
        ModelPolicy(get_profile("holotron"), ScriptedBackend(answers)),
        Approve(),
        InputPerformer(PortalInput(wayland)),
        WaylandCapture(wayland),
        EngineSettings(trajectory_root=tmp_path, settle_timeout_s=1.0, settle_poll_s=0.05, monitor=1),
    )
    wayland_target.drain()
    result = engine.run("Type a line and click the pad")
    assert (result.outcome, result.steps) == (Outcome.DONE, 4), result.detail  # the final answer is not a step taken
    wayland_target.wait_for("text", 5.0, text="typed by the engine")
    press = wayland_target.wait_for("press", 5.0, widget="pad")
    tolerance = -(-screen.width // 1000)  # normalized coordinates quantize to ceil(width/1000) pixels
    assert abs(press["x"] - (pl + pw // 2)) <= tolerance and abs(press["y"] - (pt + ph // 2)) <= tolerance


def test_sharing_without_remote_interaction_sees_but_refuses_to_act(
    gnome_stack: GnomeStack, mutter_remote: MutterRemote, wayland_target: WaylandTarget, tmp_path: Path
) -> None:
    notices: list[str] = []
    view_only = WaylandSession(
        RestoreTokenStore(tmp_path / "token"), notices.append, consent_timeout_s=CONSENT_TIMEOUT_S
    )
    error = start_with_answer(view_only, lambda: answer_consent(mutter_remote, allow_interaction=False))
    try:
        assert error is None, error
        assert notices[0] == EXPLANATION
        assert "remote interaction was not" in notices[1] and "Allow Remote Interaction" in notices[1]
        left, top, _, _ = wayland_target.ready["layout"]["pad"]
        assert WaylandCapture(view_only).grab(1).pixel_rgb(left + 5, top + 5) == PAD_COLOUR
        wayland_target.drain()
        with pytest.raises(ExecutionError, match="did not allow remote interaction"):
            InputPerformer(PortalInput(view_only)).execute(Click(Point(left + 5, top + 5)))
        time.sleep(0.3)
        assert [r for r in wayland_target.drain() if r["event"] == "press"] == []
    finally:
        view_only.close()


# -- the input conformance cases (tests/support/input_conformance.py), as the X11 backend runs them


def _wayland_field(input_performer: InputPerformer, target: WaylandTarget) -> Field:
    def prepare(start: str) -> None:
        type_into_field(input_performer, target, start)
        # A fence, then its removal: every record of the preparation has been read after these.
        assert input_performer.execute(TypeText(FENCE)).ok
        target.wait_for("text", 10.0, text=start + FENCE)
        assert input_performer.execute(KeyCombo(("backspace",))).ok
        target.wait_for("text", 10.0, text=start)

    def read_until_fence() -> tuple[str, bool]:
        enter = False
        deadline = time.monotonic() + 10.0
        while (remaining := deadline - time.monotonic()) > 0:
            line = target.process.next(remaining)
            if line is None:
                break
            record = json.loads(line)
            enter = enter or record["event"] == "enter"
            if record["event"] == "text" and record["text"].endswith(FENCE):
                return record["text"][: -len(FENCE)], enter
        return "(no fence within 10 s)", enter

    return Field(prepare, read_until_fence)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_input_conformance_cases(
    case: Case, session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland))
    problem = run_case(input_performer, _wayland_field(input_performer, wayland_target), case)
    assert problem is None, problem


# -- the pointer conformance cases (tests/support/pointer_conformance.py), as the X11 backend runs them


@pytest.mark.parametrize("case", POINTER_CASES, ids=[case.name for case in POINTER_CASES])
def test_the_pointer_conformance_cases(
    case: PointerCase, session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    wayland, _ = session
    wayland_target.settle_input(wayland)
    input_performer = InputPerformer(PortalInput(wayland))
    left, top, _, _ = wayland_target.ready["layout"]["pad"]
    fence = {"button": "MiddleButton", "x": left + FENCE_OFFSET[0], "y": top + FENCE_OFFSET[1]}
    wayland_target.drain()

    def read_until_fence() -> list[dict[str, object]]:
        return wayland_target.records_until("release", 10.0, **fence)  # the whole fence click

    wire = wayland_target.wire_mark()
    problem = run_pointer_case(input_performer, PointerWindow(Point(left, top), read_until_fence), case)
    assert problem is None, f"{problem}\nthe window's pointer events:\n{wayland_target.pointer_wire(wire)}"
