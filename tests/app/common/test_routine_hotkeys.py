"""Which routine hotkeys the tray app binds, and the words for each one it refuses."""

from __future__ import annotations

from holodesk.app.common.routine_hotkeys import plan_routine_hotkeys
from holodesk.automation.actions import KeyCombo
from holodesk.automation.routines.routine_file import Routine, RoutineStep


def routine(name: str, hotkey: str) -> Routine:
    return Routine(name=name, task="t", steps=(RoutineStep(1, KeyCombo(("enter",))),), hotkey=hotkey)


def test_distinct_hotkeys_are_bound_and_a_routine_without_one_is_left_out() -> None:
    plan = plan_routine_hotkeys(
        [routine("a", "<ctrl>+<alt>+1"), routine("b", "<ctrl>+<alt>+2"), routine("c", "")], "<ctrl>+<alt>+h", "<esc>"
    )
    assert plan.bound == {"<ctrl>+<alt>+1": "a", "<ctrl>+<alt>+2": "b"}
    assert plan.refused == {}
    assert plan.hotkey_of("b") == "<ctrl>+<alt>+2" and plan.hotkey_of("c") is None


def test_the_prompt_hotkey_in_another_spelling_is_refused() -> None:
    plan = plan_routine_hotkeys([routine("a", "<alt>+<ctrl_l>+H")], "<ctrl>+<alt>+h", "<esc>")
    assert plan.bound == {}
    assert plan.refused == {"a": "Alt+Ctrl_L+H is Holodesk's own hotkey for the task prompt; pick other keys"}


def test_a_hotkey_holding_the_stop_key_is_refused() -> None:
    plan = plan_routine_hotkeys([routine("a", "<ctrl>+<alt>+<pause>")], "<ctrl>+<alt>+h", "<pause>")
    assert plan.bound == {}
    assert "holds the stop key Pause" in plan.refused["a"]


def test_two_routines_with_the_same_keys_are_both_refused_each_naming_the_other() -> None:
    plan = plan_routine_hotkeys(
        [routine("a", "<ctrl>+<alt>+1"), routine("b", "<alt>+<ctrl>+1"), routine("c", "<ctrl>+<alt>+3")],
        "<ctrl>+<alt>+h",
        "<esc>",
    )
    assert plan.bound == {"<ctrl>+<alt>+3": "c"}
    assert "also the hotkey of the routine 'b'" in plan.refused["a"]
    assert "also the hotkey of the routine 'a'" in plan.refused["b"]
