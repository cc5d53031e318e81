"""The `run_routine` tool: a saved routine replayed as a run of the StepEngine, each step approved by the person.

It is the tray's replay (automation/routines/replay.py) with the tray's routine panel: found targets are
shown and approved, problems asked on the panel; no model is loaded here, so a target the pictures cannot
find is a problem the person answers (look again, or stop), and there is no hand-over to an agent. The
session records the client's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from holodesk.app.mcp.act_arguments import BadToolInput
from holodesk.app.mcp.one_step import RunHandle, StepReport, StepRunner
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import ActionPerformer, Approver, FrameSource, Outcome
from holodesk.automation.routines.replay import ParameterError, RoutinePolicy, RoutineQuestions, routine_engine
from holodesk.automation.routines.routine_file import RoutineFileError, load_routine, routine_folders


class RoutineDecider(Approver, RoutineQuestions, Protocol):
    """Approves a routine's steps and answers what only a routine asks (the tray's GuiRoutineApprover)."""


def read_routine_arguments(arguments: Mapping[str, object]) -> tuple[str, dict[str, str]]:
    """The routine's name and its parameter values; BadToolInput in words for anything else."""
    unknown = sorted(set(arguments) - {"name", "values"})
    if unknown:
        raise BadToolInput(f"run_routine does not take {', '.join(unknown)} (it takes name, values)")
    name = arguments.get("name")
    if not isinstance(name, str) or not name.strip():
        raise BadToolInput("name (the routine's name, as list_routines gives it) is needed")
    if Path(name).name != name or name in (".", ".."):
        raise BadToolInput(f"{name!r} is not a routine's name (a name, not a path)")
    values = arguments.get("values", {})
    if not isinstance(values, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
        raise BadToolInput("values must be an object of parameter names to text values")
    return name, dict(values)


def run_routine(
    steps: StepRunner,
    decider: RoutineDecider,
    performer: ActionPerformer,
    frames: FrameSource,
    *,
    routines: Path,
    sessions: Path,
    monitor: int | None,
    name: str,
    values: Mapping[str, str],
    client: str,
    handle: RunHandle | None = None,
) -> StepReport:
    """Replay the routine `name` to its end; BadToolInput (nothing shown) for a routine that cannot run."""
    try:
        routine = load_routine(routines / name)
    except FileNotFoundError:
        known = ", ".join(folder.name for folder in routine_folders(routines)) or "none"
        raise BadToolInput(f"there is no routine {name!r} (there are: {known})") from None
    except RoutineFileError as exc:
        raise BadToolInput(f"the routine {name!r} cannot be used: {'; '.join(exc.problems)}") from None
    try:
        policy = RoutinePolicy(routine, values, frames, decider, monitor=monitor)
    except ParameterError as exc:
        raise BadToolInput(str(exc)) from None

    def build() -> StepEngine:
        return routine_engine(
            policy,
            decider,
            performer,
            frames,
            trajectory_root=sessions,
            monitor=monitor,
            agent_steps=1,
            session_meta={"backend": "mcp", "mcp_client": client},
        )

    result = steps.run_engine(build, f"{client} via MCP: routine {routine.name!r} ({routine.task})", handle)
    session = f" (session {result.folder.name})" if result.folder is not None else ""
    if result.outcome is Outcome.DONE:
        return StepReport(True, f"the routine {routine.name!r} ran: {result.steps} steps taken{session}", result)
    return StepReport(
        False, f"the routine {routine.name!r} ended {result.outcome.value}: {result.detail}{session}", result
    )
