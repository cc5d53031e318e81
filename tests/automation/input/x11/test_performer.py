"""The X11 input performer against a real window under Xvfb: events land exactly where and as asked, nothing else.

The display tests run once per layout (1920x1080, 1366x768, and two monitors side by side). The
window runs in its own process and logs what it receives; `sync()` returns everything it saw.
pyautogui lives in this process and is re-pointed at each layout's Xvfb by the `xvfb` fixture
(see automation/virtual_display.py: point_pyautogui_at_current_display).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

from bench.rigs.target_client import Event, TargetWindow
from holodesk.automation.actions import (
    Action,
    AskUser,
    Click,
    Done,
    Drag,
    HoldAndTap,
    KeyCombo,
    Move,
    PlanGoal,
    Point,
    Scroll,
    TypeText,
    UpdatePlan,
    Wait,
)
from holodesk.automation.cancel import CancelToken
from holodesk.automation.clipboard import XCLIP
from holodesk.automation.coords import Monitor, Rect
from holodesk.automation.errors import ActionError, Cancelled, OffScreenError
from holodesk.automation.input.injected import InjectedInput, keys_for_text
from holodesk.automation.input.performer import ExecutionResult, InputPerformer
from holodesk.automation.input.primitives import drag_path
from holodesk.automation.input.programs import paste_keys
from holodesk.automation.input.x11.backend import X11Input, pyautogui_key_name
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.virtual_display import FULL_HD, LAPTOP, TWO_MONITORS, XvfbServer
from tests.support import x11_probe
from tests.support.pointer_conformance import POINTER_CASES, PointerCase, PointerWindow, run_pointer_case
from tests.support.user_clipboard import serve_user_text

ONE_MONITOR = (Monitor(1, Rect(0, 0, 1920, 1080)),)

KEYS_LOG = "holodesk.automation.input.x11.backend"  # where the key presses sent are logged


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- without a display -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (Done("all done"), ActionError),
        (AskUser("which file?"), ActionError),
        (Click(Point(1920, 500)), OffScreenError),
        (Click(Point(-1, 500)), OffScreenError),
        (Drag(Point(100, 100), Point(100, 1080)), OffScreenError),
        (TypeText("hello", at=Point(5000, 5)), OffScreenError),
        (Scroll("down", at=Point(10, -3)), OffScreenError),
        (Move(Point(0, 0)), ActionError),  # a fail-safe corner: pyautogui would stop the next step
        (Click(Point(1919, 1079)), ActionError),
    ],
    ids=lambda value: value.describe() if isinstance(value, Action) else value.__name__,
)
def test_validation_rejects_actions_it_cannot_perform(action: Action, error: type[Exception]) -> None:
    input_performer = InputPerformer(X11Input(ONE_MONITOR))
    with pytest.raises(error):
        input_performer.validate(action)
    with pytest.raises(error):
        input_performer.execute(action)


def test_validation_accepts_points_on_monitors_without_touching_the_desktop() -> None:
    backend = X11Input(ONE_MONITOR)
    input_performer = InputPerformer(backend)
    for action in (Click(Point(1, 0)), Drag(Point(5, 5), Point(1918, 1079)), Scroll("up"), Wait(0.5)):
        input_performer.validate(action)
    assert backend._pyautogui is None  # validation of pointer actions never loads the input backend


@pytest.mark.parametrize(
    ("key", "platform", "name"),
    [
        ("super", "linux", "win"),
        ("super", "win32", "win"),
        ("super", "darwin", "command"),
        ("alt", "darwin", "option"),
        ("alt", "linux", "alt"),
        ("menu", "linux", "apps"),
        ("altgr", "win32", "altright"),
        ("Return", "linux", "enter"),
        ("ctrl", "darwin", "ctrl"),
        ("f24", "linux", "f24"),
        ("volumeup", "win32", "volumeup"),
        ("a", "darwin", "a"),
    ],
)
def test_canonical_keys_map_to_pyautogui_names_per_platform(key: str, platform: str, name: str) -> None:
    assert pyautogui_key_name(key, platform) == name


@pytest.mark.parametrize(
    ("key", "platform"),
    [("fn", "linux"), ("fn", "win32"), ("volumeup", "linux"), ("insert", "darwin"), ("f21", "darwin")],
)
def test_keys_a_platform_cannot_press_are_rejected(key: str, platform: str) -> None:
    with pytest.raises(ActionError, match=key):
        pyautogui_key_name(key, platform)


def test_unknown_key_names_are_rejected() -> None:
    with pytest.raises(ActionError, match="unknown key"):
        pyautogui_key_name("hyper", "linux")


def test_paste_uses_command_on_macos_and_ctrl_elsewhere() -> None:
    assert paste_keys("darwin") == ("super", "v")
    assert pyautogui_key_name(paste_keys("darwin")[0], "darwin") == "command"
    assert paste_keys("linux") == paste_keys("win32") == ("ctrl", "v")


def test_keys_for_text_names_shift_for_capitals_and_shifted_symbols() -> None:
    assert keys_for_text("aB c\n") == {"a", "b", "shift", "space", "c", "enter"}
    assert keys_for_text("1!") == {"1", "!", "shift"}
    assert keys_for_text("x") == {"x"}


def test_drag_path_has_small_steps_and_ends_exactly_at_the_end() -> None:
    path = drag_path(Point(10, 10), Point(110, 60), step_px=10)
    assert path[-1] == Point(110, 60)
    assert len(path) == 12  # ceil(hypot(100, 50) / 10)
    previous = Point(10, 10)
    for point in path:
        assert abs(point.x - previous.x) <= 10 and abs(point.y - previous.y) <= 10
        previous = point
    assert drag_path(Point(5, 5), Point(5, 5), step_px=10) == [Point(5, 5)]


def test_injected_input_remembers_keys_for_a_short_while() -> None:
    clock = FakeClock()
    injected = InjectedInput(clock=clock)
    injected.note(["ctrl", "v"])
    assert injected.recently_injected("ctrl", within_s=0.5)
    assert injected.recently_injected("Control_L", within_s=0.5)  # queried by any spelling
    assert not injected.recently_injected("c", within_s=0.5)
    assert not injected.recently_injected("no such key", within_s=0.5)
    clock.now += 1.0
    assert not injected.recently_injected("ctrl", within_s=0.5)


def test_injected_input_counts_held_keys_until_released() -> None:
    clock = FakeClock()
    injected = InjectedInput(clock=clock)
    with injected.holding(["shift", "a"]):
        clock.now += 60.0  # a long hold is still ours
        assert injected.recently_injected("shift", within_s=0.1)
        assert injected.held_keys() == {"shift", "a"}
    assert injected.held_keys() == frozenset()
    assert injected.recently_injected("a", within_s=0.1)  # the release was just now
    clock.now += 1.0
    assert not injected.recently_injected("a", within_s=0.1)


def test_wait_sleeps_and_a_cancel_cuts_it_short() -> None:
    input_performer = InputPerformer(X11Input(ONE_MONITOR))
    result = input_performer.execute(Wait(0.05))
    assert result.ok and 0.04 <= result.duration_s < 1.0
    token = CancelToken()
    threading.Timer(0.1, token.cancel).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        input_performer.execute(Wait(30.0), token)
    assert time.monotonic() - started < 2.0


def test_an_already_cancelled_token_stops_before_anything_happens() -> None:
    token = CancelToken()
    token.cancel("user pressed the kill switch")
    with pytest.raises(Cancelled, match="kill switch"):
        InputPerformer(X11Input(ONE_MONITOR)).execute(Wait(0.01), token)


def test_execution_result_is_frozen() -> None:
    result = ExecutionResult(Wait(1.0), True, "wait 1 s", 1.0)
    with pytest.raises(AttributeError):
        result.ok = False  # type: ignore[misc]


# -- on a real display ---------------------------------------------------------------------------


def presses_and_releases(events: list[Event]) -> list[Event]:
    return [event for event in events if event["event"] in ("press", "release", "double_click")]


def pointer_event(name: str, point: Point, widget: str, button: str = "left") -> Event:
    return {"event": name, "button": button, "x": point.x, "y": point.y, "widget": widget}


def last_text(events: list[Event]) -> str | None:
    texts = [event["text"] for event in events if event["event"] == "text"]
    return texts[-1] if texts else None


@pytest.fixture
def window(target_window: TargetWindow) -> TargetWindow:
    target_window.reset()
    return target_window


@pytest.fixture(scope="module")
def input_performer(xvfb: XvfbServer) -> Iterator[InputPerformer]:
    capture = ScreenCapture()
    yield InputPerformer(X11Input(capture=capture))
    capture.close()


def pad_point(window: TargetWindow, dx: int, dy: int) -> Point:
    """A point inside the pad, off its centre (a centre is too easy to hit by accident)."""
    centre = window.centre("pad")
    return Point(centre.x + dx, centre.y + dy)


@pytest.mark.display
@pytest.mark.parametrize("xvfb", [FULL_HD, LAPTOP, TWO_MONITORS], indirect=True, ids=str, scope="module")
class TestOnDesktop:
    @pytest.mark.parametrize("case", POINTER_CASES, ids=[case.name for case in POINTER_CASES])
    def test_the_pointer_conformance_cases(
        self, case: PointerCase, window: TargetWindow, input_performer: InputPerformer
    ) -> None:
        pad = window.widget_rect("pad")
        problem = run_pointer_case(input_performer, PointerWindow(Point(pad.left, pad.top), window.sync), case)
        assert problem is None, problem

    def test_click_lands_on_the_exact_pixel(self, window: TargetWindow, input_performer: InputPerformer) -> None:
        point = pad_point(window, 37, -23)
        result = input_performer.execute(Click(point))
        assert result.ok, result.detail
        assert window.sync() == [pointer_event("press", point, "pad"), pointer_event("release", point, "pad")]
        assert x11_probe.pointer() == (point.x, point.y, [])

    def test_click_on_a_button_activates_it_once(self, window: TargetWindow, input_performer: InputPerformer) -> None:
        input_performer.execute(Click(window.centre("ok")))
        events = window.sync()
        assert [event for event in events if event["event"] == "clicked"] == [{"event": "clicked", "widget": "ok"}]
        assert len(presses_and_releases(events)) == 2

    def test_double_click_is_one_double_click(self, window: TargetWindow, input_performer: InputPerformer) -> None:
        point = pad_point(window, -51, 12)
        input_performer.execute(Click(point, count=2))
        assert presses_and_releases(window.sync()) == [
            pointer_event("press", point, "pad"),
            pointer_event("release", point, "pad"),
            pointer_event("press", point, "pad"),
            pointer_event("double_click", point, "pad"),
            pointer_event("release", point, "pad"),
        ]

    def test_right_click_uses_the_right_button(self, window: TargetWindow, input_performer: InputPerformer) -> None:
        point = pad_point(window, 100, 80)
        input_performer.execute(Click(point, button="right"))
        assert window.sync() == [
            pointer_event("press", point, "pad", "right"),
            pointer_event("release", point, "pad", "right"),
        ]

    def test_drag_presses_at_start_moves_and_releases_at_end(
        self, window: TargetWindow, input_performer: InputPerformer
    ) -> None:
        start, end = pad_point(window, -200, -100), pad_point(window, 150, 90)
        result = input_performer.execute(Drag(start, end))
        assert result.ok, result.detail
        events = window.sync()
        assert presses_and_releases(events) == [
            pointer_event("press", start, "pad"),
            pointer_event("release", end, "pad"),
        ]
        drags = [event for event in events if event["event"] == "drag"]
        assert len(drags) == 1
        assert (drags[0]["start"], drags[0]["end"]) == ([start.x, start.y], [end.x, end.y])
        moves = [(event["x"], event["y"]) for event in events if event["event"] == "move"]
        assert len(moves) >= 10 and moves[-1] == (end.x, end.y)
        assert [x for x, _ in moves] == sorted(x for x, _ in moves)  # straight on, never back
        assert x11_probe.pointer() == (end.x, end.y, [])

    @pytest.mark.parametrize("direction", ["up", "down", "left", "right"])
    def test_scroll_sends_wheel_notches_at_the_point(
        self, window: TargetWindow, input_performer: InputPerformer, direction: str
    ) -> None:
        point = pad_point(window, 60, -40)
        input_performer.execute(Scroll(direction, amount=3, at=point))
        events = window.sync()
        assert presses_and_releases(events) == []
        wheels = [event for event in events if event["event"] == "wheel"]
        assert len(wheels) == 3
        for wheel in wheels:
            assert (wheel["direction"], wheel["x"], wheel["y"], wheel["widget"]) == (direction, point.x, point.y, "pad")
            assert abs(wheel["delta_x"]) + abs(wheel["delta_y"]) == 120  # one notch each

    def test_move_puts_the_pointer_there_without_clicking(
        self, window: TargetWindow, input_performer: InputPerformer
    ) -> None:
        point = pad_point(window, -3, 77)
        input_performer.execute(Move(point))
        assert presses_and_releases(window.sync()) == []
        assert x11_probe.pointer() == (point.x, point.y, [])

    def test_typing_ascii_fills_the_field_exactly(self, window: TargetWindow, input_performer: InputPerformer) -> None:
        text = "Hello, World! (1+2)*3=9 ~`_{}|:>?\"'"
        field = window.centre("field")
        result = input_performer.execute(TypeText(text, at=field))
        assert result.ok, result.detail
        events = window.sync()
        assert last_text(events) == text
        assert presses_and_releases(events) == [
            pointer_event("press", field, "field"),
            pointer_event("release", field, "field"),
        ]
        assert input_performer.injected.recently_injected("shift", within_s=5.0)
        assert input_performer.injected.recently_injected("h", within_s=5.0)
        assert x11_probe.pressed_keycodes() == []

    def test_ascii_pyautogui_would_mistype_is_typed_by_keysym(
        self, window: TargetWindow, input_performer: InputPerformer, caplog: pytest.LogCaptureFixture
    ) -> None:
        # pyautogui would press shift + the pc105 '<' key here, which types '>'.
        with caplog.at_level(logging.INFO, logger=KEYS_LOG):
            result = input_performer.execute(TypeText("if a < b: print(a)", at=window.centre("field")))
        assert "key presses in layout group 1" in caplog.text  # the log's words, not the result's
        assert "key presses" not in result.detail
        assert last_text(window.sync()) == "if a < b: print(a)"

    def test_non_ascii_text_is_typed_by_keysym_and_the_clipboard_untouched(
        self, window: TargetWindow, input_performer: InputPerformer, caplog: pytest.LogCaptureFixture
    ) -> None:
        serve_user_text("what the user had copied ✓")
        text = "Grüße — 東京"
        with caplog.at_level(logging.INFO, logger=KEYS_LOG):
            result = input_performer.execute(TypeText(text, at=window.centre("field")))
        assert result.ok, result.detail
        assert "10 key presses in layout group 1, 5 on temporarily bound keys" in caplog.text
        assert last_text(window.sync()) == text
        assert XCLIP.read_text() == "what the user had copied ✓"
        assert x11_probe.pressed_keycodes() == []

    def test_the_clipboard_fallback_pastes_and_restores_the_clipboard(self, window: TargetWindow) -> None:
        input_performer = InputPerformer(
            X11Input(capture=ScreenCapture(), x11_typing=False)
        )  # as on a display without XTEST
        serve_user_text("what the user had copied ✓")
        text = "Grüße — 東京"
        result = input_performer.execute(TypeText(text, at=window.centre("field")))
        assert result.ok, result.detail
        assert "clipboard" in result.detail
        events = window.sync()
        assert last_text(events) == text
        assert XCLIP.read_text() == "what the user had copied ✓"
        assert input_performer.injected.recently_injected("ctrl", within_s=5.0)
        assert input_performer.injected.recently_injected("v", within_s=5.0)
        keys = [(event["event"], event["key"]) for event in events if event["event"].startswith("key_")]
        assert keys == [
            ("key_press", "Control"),
            ("key_press", "V"),
            ("key_release", "V"),
            ("key_release", "Control"),
        ]

    def test_pasting_with_an_empty_clipboard_leaves_it_empty(self, window: TargetWindow) -> None:
        input_performer = InputPerformer(X11Input(capture=ScreenCapture(), x11_typing=False))
        x11_probe.drop_clipboard_owner()
        assert XCLIP.read_text() is None
        input_performer.execute(TypeText("naïve café", at=window.centre("field")))
        assert last_text(window.sync()) == "naïve café"
        assert XCLIP.read_text() is None  # the pasted text does not linger: the clipboard has no owner again

    def test_key_combination_presses_in_order_and_releases_in_reverse(
        self, window: TargetWindow, input_performer: InputPerformer
    ) -> None:
        input_performer.execute(TypeText("select me", at=window.centre("field")))
        assert last_text(window.sync()) == "select me"
        input_performer.execute(KeyCombo(("ctrl", "a")))
        keys = [(e["event"], e["key"], e["modifiers"]) for e in window.sync() if e["event"].startswith("key_")]
        assert keys == [
            ("key_press", "Control", ["ctrl"]),
            ("key_press", "A", ["ctrl"]),
            ("key_release", "A", ["ctrl"]),
            ("key_release", "Control", []),
        ]
        input_performer.execute(KeyCombo(("delete",)))  # deletes the selection, so ctrl+a selected it all
        assert last_text(window.sync()) == ""
        input_performer.execute(KeyCombo(("shift", "x")))
        assert last_text(window.sync()) == "X"
        assert x11_probe.pressed_keycodes() == []

    def test_overwrite_replaces_the_fields_text_and_press_enter_presses_it(
        self, window: TargetWindow, input_performer: InputPerformer
    ) -> None:
        field = window.centre("field")
        input_performer.execute(TypeText("old text", at=field))
        assert last_text(window.sync()) == "old text"
        result = input_performer.execute(TypeText("new", at=field, overwrite=True, press_enter=True))
        assert result.ok, result.detail
        # The result in a person's words: what was done, not how many key presses in which layout group.
        assert result.detail == (
            f"replace the field's text with 'new' at {field}, then press Enter: "
            "pressed ctrl+a to select the field's text; typed 'new'; pressed enter"
        )
        events = window.sync()
        assert last_text(events) == "new"
        keys = [(e["event"], e["key"]) for e in events if e["event"].startswith("key_")]
        assert keys[-2:] == [("key_press", "Return"), ("key_release", "Return")]
        # without overwrite the text is added to what the field holds, and no Enter is pressed (no click:
        # a second click on the same spot this soon would be a double-click, which selects a word)
        input_performer.execute(TypeText(" more"))
        events = window.sync()
        assert last_text(events) == "new more"
        assert ("key_press", "Return") not in [(e["event"], e["key"]) for e in events if e["event"].startswith("key_")]
        assert x11_probe.pressed_keycodes() == []

    def test_hold_and_tap_and_repeated_keys(self, window: TargetWindow, input_performer: InputPerformer) -> None:
        input_performer.execute(TypeText("abcdef", at=window.centre("field")))
        assert last_text(window.sync()) == "abcdef"
        input_performer.execute(KeyCombo(("backspace",), repeat=2))
        assert last_text(window.sync()) == "abcd"
        # shift held while left is tapped twice selects "cd"; typing replaces the selection
        input_performer.execute(HoldAndTap(("shift",), ("left", "left")))
        keys = [(e["event"], e["key"]) for e in window.sync() if e["event"].startswith("key_")]
        assert keys == [
            ("key_press", "Shift"),
            ("key_press", "Left"),
            ("key_release", "Left"),
            ("key_press", "Left"),
            ("key_release", "Left"),
            ("key_release", "Shift"),
        ]
        input_performer.execute(TypeText("X"))
        assert last_text(window.sync()) == "abX"
        assert x11_probe.pressed_keycodes() == []

    def test_a_plan_changes_nothing_on_screen(self, window: TargetWindow, input_performer: InputPerformer) -> None:
        result = input_performer.execute(UpdatePlan((PlanGoal("Open the inbox", "running"),)))
        assert result.ok and result.detail == "1. Open the inbox [running]"
        assert window.sync() == []

    def test_invalid_actions_send_nothing(
        self, window: TargetWindow, input_performer: InputPerformer, xvfb: XvfbServer
    ) -> None:
        # Focus the field and park the pointer on the pad, so any stray key or click would be logged.
        input_performer.execute(TypeText("x", at=window.centre("field")))
        parked = pad_point(window, 10, 10)
        input_performer.execute(Move(parked))
        window.sync()
        off_screen = Point(xvfb.width + 3, 10)
        invalid: list[tuple[Action, type[Exception]]] = [
            (Click(off_screen), OffScreenError),
            (Click(Point(-5, 200)), OffScreenError),
            (Drag(window.centre("pad"), off_screen), OffScreenError),  # the start alone is fine
            (TypeText("abc", at=off_screen), OffScreenError),
            (Scroll("down", at=Point(200, xvfb.height)), OffScreenError),
            (Click(Point(0, 0)), ActionError),  # fail-safe corner
            (KeyCombo(("fn", "a")), ActionError),
            (Done("finished"), ActionError),
            (AskUser("which one?"), ActionError),
        ]
        if xvfb.layout.monitors:
            # On the X screen but on no monitor: right of LEFT, below RIGHT.
            invalid.append((Click(Point(2500, 900)), OffScreenError))
        for action, error in invalid:
            with pytest.raises(error):
                input_performer.execute(action)
            assert window.sync() == [], f"{action.describe()} sent input"
        assert x11_probe.pointer() == (parked.x, parked.y, [])
        assert x11_probe.pressed_keycodes() == []

    def test_cancelled_drag_releases_the_button_part_way(self, window: TargetWindow, xvfb: XvfbServer) -> None:
        slow = InputPerformer(X11Input(capture=ScreenCapture(), drag_step_px=4, drag_step_interval_s=0.02))
        pad = window.widget_rect("pad")
        start, end = Point(pad.left + 10, pad.top + 150), Point(pad.right - 10, pad.top + 150)  # ~2.4 s of steps
        token = CancelToken()
        threading.Timer(0.4, token.cancel).start()
        started = time.monotonic()
        with pytest.raises(Cancelled):
            slow.execute(Drag(start, end), token)
        assert time.monotonic() - started < 1.5
        events = presses_and_releases(window.sync())
        assert [event["event"] for event in events] == ["press", "release"]
        assert (events[0]["x"], events[0]["y"]) == (start.x, start.y)
        assert start.x < events[1]["x"] < end.x and events[1]["y"] == start.y
        assert x11_probe.pointer()[2] == []  # no button left held

    def test_fail_safe_corner_stops_a_drag_and_releases_the_button(self, window: TargetWindow) -> None:
        slow = InputPerformer(X11Input(capture=ScreenCapture(), drag_step_px=4, drag_step_interval_s=0.02))
        pad = window.widget_rect("pad")
        start, end = Point(pad.left + 10, pad.top + 100), Point(pad.right - 10, pad.top + 100)
        # The user shoves the mouse into the top-left corner and holds it there.
        let_go = threading.Event()

        def hold_pointer_in_the_corner() -> None:
            let_go.wait(0.3)
            while not let_go.is_set():
                x11_probe.move_pointer_like_the_user(0, 0)
                let_go.wait(0.005)

        user = threading.Thread(target=hold_pointer_in_the_corner)
        user.start()
        try:
            with pytest.raises(Cancelled, match="fail-safe"):
                slow.execute(Drag(start, end))
        finally:
            let_go.set()
            user.join()
        assert [event["event"] for event in presses_and_releases(window.sync())] == ["press", "release"]
        assert x11_probe.pointer()[2] == []
        # While the pointer stays in the corner, every action is refused; once moved away, they run.
        with pytest.raises(Cancelled, match="fail-safe"):
            slow.execute(Click(start))
        x11_probe.move_pointer_like_the_user(start.x, start.y)
        assert slow.execute(Click(end)).ok
        assert [(e["event"], e["x"]) for e in presses_and_releases(window.sync())] == [
            ("press", end.x),
            ("release", end.x),
        ]

    def test_a_stop_between_the_clicks_of_a_triple_click_ends_it_at_once(self, window: TargetWindow) -> None:
        # A pause between clicks far longer than any bound below: only the stop can end the action early.
        slow = InputPerformer(X11Input(capture=ScreenCapture(), multi_click_interval_s=60.0))
        point = pad_point(window, 23, 31)
        window.sync()
        token = CancelToken()
        outcome: list[BaseException | None] = []

        def triple_click() -> None:
            try:
                slow.execute(Click(point, count=3), token)
                outcome.append(None)
            except BaseException as error:  # handed to the test thread
                outcome.append(error)

        clicking = threading.Thread(target=triple_click)
        clicking.start()
        window.wait_for(lambda event: event["event"] == "release", timeout_s=30)
        token.cancel()
        clicking.join(timeout=20)
        assert not clicking.is_alive(), "the triple click went on after the stop"
        assert len(outcome) == 1 and isinstance(outcome[0], Cancelled), outcome
        assert presses_and_releases(window.sync()) == [
            pointer_event("press", point, "pad"),
            pointer_event("release", point, "pad"),
        ]

    def test_cancelled_typing_stops_between_chunks(self, window: TargetWindow) -> None:
        slow = InputPerformer(
            X11Input(capture=ScreenCapture(), type_chunk_chars=5, type_interval_s=0.01, x11_typing=False)
        )
        text = "abcde" * 40  # 200 keys at 10 ms: about 2 s
        slow.execute(Click(window.centre("field")))
        token = CancelToken()
        seen: list[Event] = []

        def stop_once_text_arrived() -> None:
            # Not a fixed delay: on a loaded fresh machine 0.4 s came before the first key, and nothing was typed.
            deadline = time.monotonic() + 30
            while not last_text(seen) and time.monotonic() < deadline:
                seen.extend(window.sync())
                time.sleep(0.02)
            token.cancel()

        stopper = threading.Thread(target=stop_once_text_arrived)
        stopper.start()
        with pytest.raises(Cancelled):
            slow.execute(TypeText(text), token)
        stopper.join(35)
        typed = last_text(seen + window.sync()) or ""
        assert 0 < len(typed) < len(text)
        assert text.startswith(typed)
        assert len(typed) % 5 == 0  # it stopped between chunks, not inside one
        assert x11_probe.pressed_keycodes() == []
