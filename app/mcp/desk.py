"""The desk the MCP tools work on: the capture, the one-step runner, the routines folder; synchronous calls.

The server (app/mcp/server.py) calls these on worker threads; nothing here knows MCP's wire format.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from holodesk.app.cli.routine_command import list_routines
from holodesk.app.mcp.act_arguments import BadToolInput, ScreenSize
from holodesk.app.mcp.agent_task import AgentTasks
from holodesk.app.mcp.locate_tool import Located, NotLocated, locate_on
from holodesk.app.mcp.one_step import DeskParts, RunHandle, StepReport, StepRunner
from holodesk.app.mcp.own_windows import own_window_refusal
from holodesk.app.mcp.routine_run import RoutineDecider, run_routine
from holodesk.automation.actions import Action
from holodesk.automation.routines.windows import WindowProbe
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.fast_png import encode_png


@dataclass(frozen=True, slots=True)
class Screenshot:
    """A PNG of the monitor Holodesk works on, its size (physical pixels) and the monitor's scale."""

    png: bytes
    size: ScreenSize
    scale: float
    left: int
    top: int


class Desk:
    """One desktop, one approver: the tools' synchronous side."""

    def __init__(
        self,
        parts: DeskParts,
        routines: Path,
        steps: StepRunner | None = None,
        windows: WindowProbe | None = None,
        routine_decider: RoutineDecider | None = None,
        tasks: AgentTasks | None = None,
    ) -> None:
        self.parts = parts
        self.routines = routines
        self.steps = steps or StepRunner(parts)
        self.windows = windows  # None: the desktop's windows cannot be asked (or, in tests, are not)
        self.routine_decider = routine_decider  # None: routines cannot be run here
        self.tasks = tasks  # None: no model, no run_task

    def run_routine(self, name: str, values: Mapping[str, str], client: str, handle: RunHandle) -> StepReport:
        """Replay a saved routine, approved step by step; BadToolInput for one that cannot run."""
        if self.routine_decider is None:
            raise BadToolInput("routines cannot be run by this server (it has no routine panel)")
        parts = self.parts
        return run_routine(
            self.steps,
            self.routine_decider,
            parts.performer,
            parts.frames,
            routines=self.routines,
            sessions=parts.sessions,
            monitor=parts.monitor,
            name=name,
            values=values,
            client=client,
            handle=handle,
        )

    def grab(self) -> ScreenFrame:
        return self.parts.frames.grab(self.parts.monitor)

    def screen_size(self) -> ScreenSize:
        frame = self.grab()
        return ScreenSize(frame.width, frame.height, frame.region.left, frame.region.top)

    def refusal(self, action: Action, screen: ScreenSize) -> str | None:
        """Why the action must not be shown (it aims at Holodesk's own window), or None."""
        return own_window_refusal(screen.on_desktop(action), self.windows)

    def screenshot(self) -> Screenshot:
        frame = self.grab()
        scale = frame.monitor.scale if frame.monitor is not None else 1.0
        png = encode_png(frame.to_image())
        return Screenshot(png, ScreenSize(frame.width, frame.height), scale, frame.region.left, frame.region.top)

    def locate(self, description: str) -> Located:
        """Where the configured model sees `description` on the screen now; NotLocated, ModelBusy or
        PolicyUnavailable in words when it cannot say."""
        if self.tasks is None:
            raise NotLocated("no model is configured for holodesk mcp")
        with self.tasks.model_for_a_question() as policy:
            return locate_on(self.grab(), policy, description)

    def routine_list(self) -> str:
        out = io.StringIO()
        list_routines(self.routines, out)
        return out.getvalue()
