"""One run at a time on a desktop the tray app shares: an agent's act or locate while the tray's own task
holds the turn is refused in words naming it, nothing asked or done, and once the turn is given back they run."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from holodesk.app.mcp.agent_task import AgentTasks, TaskSettings
from holodesk.app.mcp.desk import Desk
from holodesk.app.mcp.desk_turn import DeskTurn
from holodesk.app.mcp.one_step import DeskParts, StepRunner
from holodesk.automation.engine_protocols import ApprovalDecision
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.scripted import ScriptedBackend
from tests.app.mcp.test_one_step import Approver, Performer, Screen
from tests.app.mcp.test_server_tools import NoQuestions, call

TRAY_TASK = "a task or routine started in the tray"


def shared_desk(tmp_path, turn: DeskTurn) -> tuple[Desk, Approver, Performer, ScriptedBackend]:
    approver, performer = Approver(ApprovalDecision.approve()), Performer()
    parts = DeskParts(approver, performer, Screen(), tmp_path / "sessions", monitor=2)
    backend = ScriptedBackend(['{"x": 500, "y": 250}'])
    tasks = AgentTasks(
        parts,
        NoQuestions(),
        load_policy=lambda: ModelPolicy(get_profile("holotron"), backend),
        settings=TaskSettings(max_steps=5, backend="scripted", profile="holotron"),
        turn=turn,
    )
    steps = StepRunner(parts, 0.2, 0.01, turn=turn)
    return Desk(parts, tmp_path / "routines", steps, tasks=tasks), approver, performer, backend


def test_an_agents_act_and_locate_wait_for_no_tray_task_they_are_refused_naming_it(tmp_path):
    turn = DeskTurn()
    desk, approver, performer, backend = shared_desk(tmp_path, turn)
    assert turn.take(TRAY_TASK) is None  # the tray's own task runs
    with pytest.raises(MCPError) as refused:
        call(desk, "act", {"action": "click", "x": 5, "y": 5})
    located = call(desk, "locate", {"description": "the OK button"})
    assert f"{TRAY_TASK} is running on this desktop" in refused.value.error.message, refused.value.error
    assert located.is_error and f"{TRAY_TASK} is running" in located.content[0].text, located.content
    assert approver.requests == [] and performer.executed == [] and backend.requests == []
    assert turn.take("another") == TRAY_TASK  # still the tray's: a refused agent took nothing
    turn.give_back()  # the tray's task ended
    assert not call(desk, "act", {"action": "click", "x": 5, "y": 5}).is_error
    assert not call(desk, "locate", {"description": "the OK button"}).is_error
    assert len(performer.executed) == 1 and not turn.taken  # each run gave the turn back


def test_a_tray_task_is_not_started_while_an_agents_step_holds_the_turn(tmp_path):
    turn = DeskTurn()
    assert turn.take("an MCP client's step") is None
    assert turn.take(TRAY_TASK) == "an MCP client's step"
    turn.give_back()
    assert turn.take(TRAY_TASK) is None


def test_the_trays_desk_asks_for_the_model_each_time_so_a_model_the_tray_reloaded_answers(tmp_path):
    approver, performer = Approver(ApprovalDecision.approve()), Performer()
    parts = DeskParts(approver, performer, Screen(), tmp_path / "sessions", monitor=2)
    loaded = [ScriptedBackend(['{"x": 500, "y": 250}'])]  # the tray's model now; the tray may replace it
    tasks = AgentTasks(
        parts,
        NoQuestions(),
        load_policy=lambda: ModelPolicy(get_profile("holotron"), loaded[-1]),
        settings=TaskSettings(max_steps=5, backend="scripted", profile="holotron"),
        keep_policy=False,
    )
    desk = Desk(parts, tmp_path / "routines", StepRunner(parts, 0.2, 0.01), tasks=tasks)
    assert not call(desk, "locate", {"description": "the OK button"}).is_error
    loaded.append(ScriptedBackend(['{"x": 100, "y": 100}']))  # the tray loaded another model
    second = call(desk, "locate", {"description": "the OK button"})
    assert second.structured_content is not None and second.structured_content["x"] == 64, second.content
    assert len(loaded[0].requests) == 1 and len(loaded[1].requests) == 1
