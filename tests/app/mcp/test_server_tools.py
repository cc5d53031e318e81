"""The MCP server's tools through the SDK's own client (in-process), over a desk of fakes."""

from __future__ import annotations

import base64
import threading

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation

from holodesk.app.mcp.agent_task import AgentTasks, TaskSettings
from holodesk.app.mcp.desk import Desk
from holodesk.app.mcp.one_step import DeskParts, StepRunner
from holodesk.app.mcp.server import DeskServer
from holodesk.automation.actions import Click, Point
from holodesk.automation.engine_protocols import ApprovalDecision
from holodesk.automation.routines.replay import ProblemChoice
from holodesk.automation.trajectory import iter_session_folders, read_session
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.scripted import ScriptedBackend
from tests.app.mcp.test_one_step import Approver, Performer, Screen


class RoutineDecider(Approver):
    """Approves as `Approver` does; a routine's problem stops it, and a repair is declined."""

    def problem(self, request):
        return ProblemChoice.STOP

    def offer_repair(self, request):
        return False


def desk(approver, tmp_path) -> tuple[Desk, Performer]:
    performer = Performer()
    parts = DeskParts(approver, performer, Screen(), tmp_path / "sessions", monitor=2)
    decider = RoutineDecider(approver.decision)
    return Desk(parts, tmp_path / "routines", StepRunner(parts, 0.2, 0.01), routine_decider=decider), performer


def call(desk_: Desk, tool: str, arguments: dict | None = None, name: str = "probe-agent"):
    async def go():
        async with Client(DeskServer(desk_).server, client_info=Implementation(name=name, version="1.0")) as client:
            try:
                return await client.call_tool(tool, arguments or {})
            except MCPError as exc:  # raised here, not out of the client's task group
                return exc

    answer = anyio.run(go)
    if isinstance(answer, MCPError):
        raise answer
    return answer


def test_the_tools_are_listed_with_schemas(tmp_path):
    async def go():
        async with Client(DeskServer(desk(Approver(ApprovalDecision.approve()), tmp_path)[0]).server) as client:
            return await client.list_tools()

    listed = {tool.name: tool for tool in anyio.run(go).tools}
    assert set(listed) == {"screenshot", "act", "locate", "list_routines", "run_routine", "run_task"}
    assert listed["act"].input_schema["required"] == ["action"]
    assert "approve" in listed["act"].description


def test_act_approved_runs_and_names_the_client_in_the_session(tmp_path):
    d, performer = desk(Approver(ApprovalDecision.approve()), tmp_path)
    result = call(d, "act", {"action": "click", "x": 10, "y": 20, "reason": "open it"})
    assert not result.is_error, result.content
    assert performer.executed == [Click(Point(510, 20))]
    (folder,) = iter_session_folders(tmp_path / "sessions")
    assert read_session(folder).task.startswith("probe-agent 1.0 via MCP: click at")
    assert result.structured_content["session"] == folder.name


def test_act_skipped_is_a_tool_error_in_words_and_nothing_ran(tmp_path):
    d, performer = desk(Approver(ApprovalDecision.skip()), tmp_path)
    result = call(d, "act", {"action": "click", "x": 10, "y": 20})
    assert result.is_error
    assert result.content[0].text.startswith("the person skipped this step: nothing was done")
    assert performer.executed == []


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"action": "click", "x": 640, "y": 20}, "x=640, y=20 is off the screen: the screenshot is 640x480 pixels"),
        ({"action": "key", "keys": "ctrl+banana"}, "unknown key name 'banana'"),
        ({"action": "type", "text": "y" * 10_001}, "at most 10000"),
        ({"action": "click", "x": "ten", "y": 20}, "x must be a whole number"),
    ],
)
def test_bad_input_is_an_mcp_error_and_nothing_is_asked_or_done(tmp_path, arguments, words):
    approver = Approver(ApprovalDecision.approve())
    d, performer = desk(approver, tmp_path)
    with pytest.raises(MCPError) as refused:
        call(d, "act", arguments)
    assert words in refused.value.error.message and "nothing was done" in refused.value.error.message
    assert approver.requests == [] and performer.executed == []
    assert list(iter_session_folders(tmp_path / "sessions")) == []


def test_a_second_act_while_one_waits_is_refused_in_words(tmp_path):
    approver = Approver(ApprovalDecision.approve(), hold=True)
    d, _ = desk(approver, tmp_path)
    blocking = threading.Thread(target=lambda: call(d, "act", {"action": "click", "x": 1, "y": 1}), daemon=True)
    blocking.start()
    assert approver.asked.wait(10)
    with pytest.raises(MCPError) as refused:
        call(d, "act", {"action": "click", "x": 2, "y": 2})
    assert "send one step at a time" in refused.value.error.message
    d.steps.stop()
    blocking.join(10)


def test_screenshot_is_a_png_of_the_monitor_with_its_size(tmp_path):
    d, _ = desk(Approver(ApprovalDecision.approve()), tmp_path)
    result = call(d, "screenshot")
    image = result.content[0]
    assert base64.b64decode(image.data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.structured_content["width"] == 640 and result.structured_content["height"] == 480


class NoQuestions:
    def answer_question(self, request):
        raise AssertionError("locate asks the person nothing")


def desk_with_model(approver, tmp_path, *answers: str) -> tuple[Desk, Performer, ScriptedBackend]:
    """A desk whose configured model answers `answers` in turn (Holotron's profile, 0-1000)."""
    performer = Performer()
    parts = DeskParts(approver, performer, Screen(), tmp_path / "sessions", monitor=2)
    backend = ScriptedBackend(answers)
    tasks = AgentTasks(
        parts,
        NoQuestions(),
        load_policy=lambda: ModelPolicy(get_profile("holotron"), backend),
        settings=TaskSettings(max_steps=5, backend="scripted", profile="holotron"),
    )
    return Desk(parts, tmp_path / "routines", StepRunner(parts, 0.2, 0.01), tasks=tasks), performer, backend


def test_locate_gives_the_models_point_in_the_screenshots_pixels_and_does_nothing(tmp_path):
    approver = Approver(ApprovalDecision.approve())
    d, performer, backend = desk_with_model(approver, tmp_path, '{"x": 500, "y": 250}')
    result = call(d, "locate", {"description": "the OK button"})
    assert not result.is_error, result.content
    # The monitor's screenshot is 640x480 (its corner at 500,0 on the desktop): 500/1000 and 250/1000 of it.
    assert result.structured_content == {"x": 320, "y": 120, "width": 640, "height": 480}
    assert "x=320, y=120" in result.content[0].text and "nothing was done" in result.content[0].text
    (request,) = backend.requests
    assert "the OK button" in str(request.messages)
    assert approver.requests == [] and performer.executed == []


def test_locate_refuses_an_answer_that_is_not_one_point_with_its_text_escaped(tmp_path):
    d, performer, _ = desk_with_model(Approver(ApprovalDecision.approve()), tmp_path, "left\x1b[2J side")
    result = call(d, "locate", {"description": "the OK button"})
    assert result.is_error and "locate: the model's answer could not be used" in result.content[0].text
    assert "\x1b" not in result.content[0].text and performer.executed == []


def test_locate_refuses_a_point_off_the_screenshot(tmp_path):
    d, _, _ = desk_with_model(Approver(ApprovalDecision.approve()), tmp_path, '{"x": 1500, "y": 250}')
    result = call(d, "locate", {"description": "the OK button"})
    assert result.is_error and "x=1500 is outside [0, 1000]" in result.content[0].text


def test_locate_waits_for_no_task_it_is_refused_while_the_model_works_on_one(tmp_path):
    d, _, _ = desk_with_model(Approver(ApprovalDecision.approve()), tmp_path, '{"x": 500, "y": 250}')
    assert d.tasks is not None
    with d.tasks.model_for_a_question():  # as a run_task holds it for its whole run
        result = call(d, "locate", {"description": "the OK button"})
    assert result.is_error and "the model is working on a task (run_task)" in result.content[0].text
    assert not call(d, "locate", {"description": "the OK button"}).is_error


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({}, "description (the element, in words) is needed"),
        ({"description": "   "}, "description (the element, in words) is needed"),
        ({"description": "x" * 501}, "the description is 501 characters (at most 500)"),
        ({"description": "OK", "x": 3}, "locate does not take x (it takes description)"),
    ],
)
def test_locate_bad_input_is_an_mcp_error_in_words(tmp_path, arguments, words):
    d, _, backend = desk_with_model(Approver(ApprovalDecision.approve()), tmp_path, '{"x": 500, "y": 250}')
    with pytest.raises(MCPError) as refused:
        call(d, "locate", arguments)
    assert words in refused.value.error.message and "nothing was done" in refused.value.error.message
    assert backend.requests == []


def test_locate_without_a_model_says_so_and_an_unknown_tool_is_named(tmp_path):
    d, _ = desk(Approver(ApprovalDecision.approve()), tmp_path)
    result = call(d, "locate", {"description": "the OK button"})
    assert result.is_error and "locate: no model is configured for holodesk mcp" in result.content[0].text
    with pytest.raises(MCPError) as refused:
        call(d, "fly")
    assert "there is no tool 'fly'" in refused.value.error.message


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"name": "weekly-report"}, "there is no routine 'weekly-report' (there are: none)"),
        ({"name": "../sessions"}, "'../sessions' is not a routine's name (a name, not a path)"),
        ({"name": "x", "values": {"n": 3}}, "values must be an object of parameter names to text values"),
        ({}, "name (the routine's name, as list_routines gives it) is needed"),
    ],
)
def test_run_routine_bad_input_is_an_mcp_error_in_words(tmp_path, arguments, words):
    approver = Approver(ApprovalDecision.approve())
    d, performer = desk(approver, tmp_path)
    with pytest.raises(MCPError) as refused:
        call(d, "run_routine", arguments)
    assert words in refused.value.error.message and "nothing was done" in refused.value.error.message
    assert approver.requests == [] and performer.executed == []


def test_run_task_without_a_model_says_so_and_bad_tasks_are_refused_in_words(tmp_path):
    d, performer = desk(Approver(ApprovalDecision.approve()), tmp_path)
    result = call(d, "run_task", {"task": "Press OK"})
    assert result.is_error and "no model is configured" in result.content[0].text
    with pytest.raises(MCPError) as refused:
        call(d, "run_task", {"task": "   "})
    assert "task (what to do, in words) is needed" in refused.value.error.message
    assert performer.executed == []
