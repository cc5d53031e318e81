"""The task the agent is handed when a routine cannot go on: the values of this run, each said once."""

from __future__ import annotations

from holodesk.automation.actions import Click, TypeText
from holodesk.automation.coords import Point
from holodesk.automation.routines.replay import handover_task, task_with_values
from holodesk.automation.routines.routine_file import Parameter, Routine, RoutineStep

RECORDED = "echo hello-newcomer2"
GIVEN = "echo handover-value"


def terminal_routine(task: str = f"run {RECORDED}") -> Routine:
    return Routine(
        name="greet",
        task=task,
        steps=(
            RoutineStep(1, Click(Point(400, 300))),
            RoutineStep(2, TypeText(RECORDED, press_enter=True), text_parameter="text_1"),
        ),
        parameters=(Parameter("text_1", RECORDED),),
    )


def test_the_handed_over_task_is_this_runs_task_with_the_value_given_once():
    task = handover_task(terminal_routine(), 2, {"text_1": GIVEN})
    assert task.splitlines()[0] == f"run {GIVEN}"  # the task to do now, not the recorded one
    assert RECORDED not in task  # no second, contradicting value
    assert "Values for this run" not in task
    left = "Still to do (the routine could not): type 'echo handover-value' (the value of text_1) and press Enter"
    assert left in task


def test_a_value_the_task_does_not_name_is_added_to_it_once():
    routine = terminal_routine(task="greet the newcomer in the terminal")
    assert task_with_values(routine, {"text_1": GIVEN}) == (
        "greet the newcomer in the terminal (this time with text_1: 'echo handover-value')"
    )


def test_the_recorded_values_leave_the_task_as_recorded():
    routine = terminal_routine()
    assert task_with_values(routine, {"text_1": RECORDED}) == routine.task
    assert task_with_values(routine, {}) == routine.task
