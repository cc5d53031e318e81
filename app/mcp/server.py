"""The MCP server: the tools' handlers on the SDK's lowlevel Server (app/mcp/transports.py serves it).

Each `act` runs on a worker thread as one StepEngine run (app/mcp/one_step.py) while the handler waits.
A `notifications/cancelled` for it (the SDK cancels the handler's scope), or the client going away, stops
that run as the tray's Stop does: the waiting step is withdrawn, input in progress is released, and the
session is recorded as stopped before the handler gives up. Bad input is an MCP error in words
(INVALID_PARAMS) and nothing is shown or done; a step the person skipped or stopped is a tool error.
"""

from __future__ import annotations

import base64
import logging
import queue
import threading
from collections.abc import Callable, Mapping

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from holodesk.app.mcp import tools
from holodesk.app.mcp.act_arguments import BadToolInput, read_act
from holodesk.app.mcp.agent_task import ModelBusy, PolicyUnavailable
from holodesk.app.mcp.desk import Desk
from holodesk.app.mcp.locate_tool import NotLocated, read_description
from holodesk.app.mcp.one_step import BUSY, RecordIncomplete, RunHandle, StepBusy, StepReport
from holodesk.app.mcp.progress import send_progress
from holodesk.app.mcp.routine_run import read_routine_arguments
from holodesk.automation.engine_protocols import EngineEvent
from holodesk.automation.errors import AutomationError

log = logging.getLogger(__name__)

SERVER_NAME = "holodesk"
UNNAMED_CLIENT = "an unnamed MCP client"
PROGRESS_POLL_S = 0.1  # how often a waiting run's events are sent on as progress
MAX_TASK_CHARS = 2000
INSTRUCTIONS = (
    "Holodesk performs desktop actions only after the person at this computer approves each one on its"
    " approval panel. Take a screenshot, then call act with one action; it returns once the person has"
    " answered. A skipped or stopped step did nothing."
)


def client_name(ctx: ServerRequestContext) -> str:
    """The client's name from the MCP handshake (or the request's envelope), for the session's record."""
    params = ctx.session.client_params
    if params is None:
        return UNNAMED_CLIENT
    info = params.client_info
    name = info.title or info.name
    return f"{name} {info.version}".strip() if info.version else name


class DeskServer:
    """The tools' async handlers over one Desk."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk
        self.server: Server = Server(
            SERVER_NAME,
            version=_version(),
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    async def _list_tools(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.TOOLS)

    async def _call_tool(self, ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments: Mapping[str, object] = params.arguments or {}
        name = params.name
        if name == tools.ACT:
            return await self._act(ctx, arguments)
        if name == tools.SCREENSHOT:
            _no_arguments(name, arguments)
            return await self._screenshot()
        if name == tools.LIST_ROUTINES:
            _no_arguments(name, arguments)
            text = await anyio.to_thread.run_sync(self.desk.routine_list)
            return _text(text)
        if name == tools.RUN_TASK:
            return await self._run_task(ctx, arguments)
        if name == tools.RUN_ROUTINE:
            return await self._run_routine(ctx, arguments)
        if name == tools.LOCATE:
            return await self._locate(arguments)
        known = ", ".join(tool.name for tool in tools.TOOLS)
        raise MCPError(INVALID_PARAMS, f"there is no tool {name!r} (there are {known})")

    async def _screenshot(self) -> types.CallToolResult:
        try:
            shot = await anyio.to_thread.run_sync(self.desk.screenshot)
        except AutomationError as exc:
            return _text(f"the screen could not be captured: {exc}", error=True)
        facts = {
            "width": shot.size.width,
            "height": shot.size.height,
            "scale": shot.scale,
            "monitor_left": shot.left,
            "monitor_top": shot.top,
        }
        image = types.ImageContent(data=base64.b64encode(shot.png).decode("ascii"), mime_type="image/png")
        words = types.TextContent(
            text=f"screenshot {shot.size.width}x{shot.size.height} physical pixels, scale {shot.scale:g};"
            " act's pixel coordinates refer to it"
        )
        return types.CallToolResult(content=[image, words], structured_content=facts)

    async def _locate(self, arguments: Mapping[str, object]) -> types.CallToolResult:
        try:
            description = read_description(arguments)
        except BadToolInput as exc:
            raise MCPError(INVALID_PARAMS, f"locate: {exc}; nothing was done") from None
        try:
            found = await anyio.to_thread.run_sync(self.desk.locate, description)
        except PolicyUnavailable as exc:
            return _text(f"locate: the model is not available: {exc}", error=True)
        except (NotLocated, ModelBusy) as exc:
            return _text(f"locate: {exc}", error=True)
        except AutomationError as exc:
            return _text(f"the screen could not be captured: {exc}", error=True)
        facts = {"x": found.x, "y": found.y, "width": found.width, "height": found.height}
        words = (
            f"x={found.x}, y={found.y} in the pixels of the {found.width}x{found.height} screenshot"
            " (act's pixel coordinates); nothing was done"
        )
        return types.CallToolResult(content=[types.TextContent(text=words)], structured_content=facts)

    async def _act(self, ctx: ServerRequestContext, arguments: Mapping[str, object]) -> types.CallToolResult:
        steps = self.desk.steps
        if steps.busy():
            raise MCPError(INVALID_PARAMS, BUSY)
        try:
            screen = await anyio.to_thread.run_sync(self.desk.screen_size)
        except AutomationError as exc:
            return _text(f"the screen could not be captured: {exc}; nothing was done", error=True)
        try:
            request = read_act(arguments, screen)
        except BadToolInput as exc:
            raise MCPError(INVALID_PARAMS, f"act: {exc}; nothing was done") from None
        refusal = await anyio.to_thread.run_sync(self.desk.refusal, request.action, screen)
        if refusal is not None:
            return _text(refusal, error=True)
        client = client_name(ctx)
        return await self._until_ended(lambda handle: steps.run(request, screen, client, handle), "act")

    async def _run_routine(self, ctx: ServerRequestContext, arguments: Mapping[str, object]) -> types.CallToolResult:
        if self.desk.steps.busy():
            raise MCPError(INVALID_PARAMS, BUSY)
        try:
            name, values = read_routine_arguments(arguments)
        except BadToolInput as exc:
            raise MCPError(INVALID_PARAMS, f"run_routine: {exc}; nothing was done") from None
        client = client_name(ctx)
        return await self._until_ended(
            lambda handle: self.desk.run_routine(name, values, client, handle), "run_routine"
        )

    async def _run_task(self, ctx: ServerRequestContext, arguments: Mapping[str, object]) -> types.CallToolResult:
        unknown = sorted(set(arguments) - {"task"})
        task = arguments.get("task")
        if unknown:
            raise MCPError(INVALID_PARAMS, f"run_task does not take {', '.join(unknown)} (it takes task)")
        if not isinstance(task, str) or not task.strip():
            raise MCPError(INVALID_PARAMS, "run_task: task (what to do, in words) is needed; nothing was done")
        if len(task) > MAX_TASK_CHARS:
            raise MCPError(INVALID_PARAMS, f"run_task: the task is {len(task)} characters (at most {MAX_TASK_CHARS})")
        tasks = self.desk.tasks
        if tasks is None:
            return _text("run_task is not available here: no model is configured for holodesk mcp", error=True)
        if self.desk.steps.busy():
            raise MCPError(INVALID_PARAMS, BUSY)
        client = client_name(ctx)
        events: queue.SimpleQueue[EngineEvent] = queue.SimpleQueue()
        return await self._until_ended(
            lambda handle: tasks.run(self.desk.steps, task, client, handle, events.put),
            "run_task",
            progress=(ctx, events),
        )

    async def _until_ended(
        self,
        run: Callable[[RunHandle], StepReport],
        tool: str,
        progress: tuple[ServerRequestContext, queue.SimpleQueue[EngineEvent]] | None = None,
    ) -> types.CallToolResult:
        """Run `run` (one engine run) on a worker thread until it has ended, the person's answers included;
        with `progress`, the run's events go to the client as MCP progress notifications meanwhile.

        A cancel (notifications/cancelled, or the client going away) stops that run as the tray's Stop does,
        and the handler waits for its session to record the stop before it is gone.
        """
        outcome: list[StepReport | BaseException] = []
        finished = threading.Event()
        handle = RunHandle()
        sent = 0

        def work() -> None:
            try:
                outcome.append(run(handle))
            except BaseException as exc:  # handed to the handler, which says it in words
                outcome.append(exc)
            finally:
                finished.set()

        threading.Thread(target=work, name=f"holodesk-mcp-{tool}", daemon=True).start()
        try:
            while not finished.is_set():
                await anyio.to_thread.run_sync(finished.wait, PROGRESS_POLL_S, abandon_on_cancel=True)
                if progress is not None:
                    sent = await send_progress(*progress, sent)
        except anyio.get_cancelled_exc_class():
            handle.stop()  # this run only; one not started yet ends before its first step
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(finished.wait)
            raise
        (report,) = outcome
        if isinstance(report, StepBusy):  # its words say who holds the desktop (another step, the tray's task)
            raise MCPError(INVALID_PARAMS, str(report))
        if isinstance(report, BadToolInput):
            raise MCPError(INVALID_PARAMS, f"{tool}: {report}; nothing was done")
        if isinstance(report, RecordIncomplete):
            return _text(f"{tool}: {report}; nothing was done", error=True)
        if isinstance(report, PolicyUnavailable):
            return _text(f"{tool}: the model is not available: {report}; nothing was done", error=True)
        if isinstance(report, BaseException):
            log.error("the %s run failed", tool, exc_info=report)
            return _text(f"the {tool} could not be run: {type(report).__name__}: {report}", error=True)
        structured = {
            "done": report.ok,
            "outcome": report.result.outcome.value,
            "session": report.result.folder.name if report.result.folder is not None else None,
        }
        return types.CallToolResult(
            content=[types.TextContent(text=report.words)], structured_content=structured, is_error=not report.ok
        )


def _no_arguments(name: str, arguments: Mapping[str, object]) -> None:
    if arguments:
        raise MCPError(INVALID_PARAMS, f"{name} takes no arguments, got {', '.join(sorted(arguments))}")


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("holodesk")
    except PackageNotFoundError:
        return "0"
