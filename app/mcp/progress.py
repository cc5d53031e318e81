"""A run's engine events as MCP progress notifications, in words for the agent."""

from __future__ import annotations

import queue

from mcp.server.context import ServerRequestContext

from holodesk.automation.engine_protocols import EngineEvent, EngineState


async def send_progress(ctx: ServerRequestContext, events: queue.SimpleQueue[EngineEvent], sent: int) -> int:
    """Each engine event waiting in `events` as a progress notification (a no-op unless the client asked)."""
    while True:
        try:
            event = events.get_nowait()
        except queue.Empty:
            return sent
        words = progress_words(event)
        if words:
            sent += 1
            await ctx.session.report_progress(sent, None, words)


def progress_words(event: EngineEvent) -> str:
    """An engine event as the client's progress message ("" for one not worth a message)."""
    step = f"step {event.step}"
    if event.state is EngineState.THINKING:
        return f"{step}: the model is proposing the next action"
    if event.state is EngineState.WAITING_APPROVAL:
        return f"{step}: waiting for the person's approval: {event.detail}"
    if event.state is EngineState.WAITING_ANSWER:
        return f"{step}: the model asks the person: {event.detail}"
    if event.state is EngineState.ACTING:
        return f"{step}: approved, doing it: {event.detail}"
    if event.state in (EngineState.STEP_FAILED, EngineState.NO_VISIBLE_CHANGE):
        return f"{step}: {event.detail}"
    if event.state is EngineState.FINISHED and event.result is not None:
        return f"finished, {event.result.outcome.value}: {event.detail}"
    return ""
