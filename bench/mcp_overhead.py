"""Holodesk's own time per approved MCP `act`, the person's time left out.

A private Xvfb (1920x1080), the real capture and X11 input, the real StepEngine and session recording
(a temporary sessions folder), and `holodesk mcp`'s server driven by the MCP SDK's own client in-process.
The approver answers Approve the moment it is asked, so everything measured is Holodesk's: checking the
arguments (one grab for the screen's size), the engine's capture, proposal, checks and the step written
ahead of its action, the click itself, the wait for the screen to settle (two identical grabs, one poll
apart), and the session's end record. Figures: the whole call, the part before the person is asked, and
the part after the approval. Goal: under 50 ms for the whole call.

    python -m bench.mcp_overhead [--quick]      # writes bench/mcp_overhead_results.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from bench.harness import BenchResult, BenchSettings, format_table, machine_description, stats_of, write_results
from holodesk.app.mcp.desk import Desk
from holodesk.app.mcp.one_step import DeskParts
from holodesk.app.mcp.server import DeskServer
from holodesk.automation.backends import create_backends
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest
from holodesk.automation.virtual_display import FULL_HD, xvfb_display

NAME = "mcp_overhead"
GOAL_MS = 50.0
ROUNDS = 30
RESULTS = Path(__file__).resolve().parent / "mcp_overhead_results.json"


class InstantApprover:
    """Approves at once, noting when it was asked (perf_counter seconds)."""

    def __init__(self) -> None:
        self.asked_at: list[float] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked_at.append(time.perf_counter())
        return ApprovalDecision.approve()


def run(settings: BenchSettings) -> BenchResult:
    rounds = 5 if settings.quick else max(settings.repeats, ROUNDS)
    totals: list[float] = []
    before: list[float] = []
    after: list[float] = []
    with xvfb_display(FULL_HD), tempfile.TemporaryDirectory() as folder:
        backends = create_backends()
        approver = InstantApprover()
        desk = Desk(DeskParts(approver, backends.performer, backends.capture, Path(folder), 1), Path(folder))
        server = DeskServer(desk).server

        async def measure() -> None:
            async with Client(server) as client:
                for index in range(settings.warmup + rounds):
                    started = time.perf_counter()
                    result = await client.call_tool("act", {"action": "click", "x": 100 + index, "y": 100})
                    ended = time.perf_counter()
                    if result.is_error:
                        raise RuntimeError(f"the act failed: {result.content}")
                    if index >= settings.warmup:
                        asked = approver.asked_at[-1]
                        totals.append((ended - started) * 1000)
                        before.append((asked - started) * 1000)
                        after.append((ended - asked) * 1000)

        try:
            anyio.run(measure)
        finally:
            backends.close()
    result = BenchResult(NAME)
    result.add("act, whole call (approved at once)", stats_of(totals), goal=GOAL_MS)
    result.add("act, until the person is asked", stats_of(before))
    result.add("act, after the approval (click, settle, record)", stats_of(after))
    result.notes.append(
        f"{rounds} clicks on a bare 1920x1080 Xvfb; the settle wait is one poll"
        f" ({desk.steps.settle_poll_s * 1000:g} ms) between two identical grabs, part of 'after the approval'"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    started = time.monotonic()
    result = run(BenchSettings(quick=args.quick))
    print(format_table(result.figures))
    for note in result.notes:
        print(f"note: {note}")
    write_results(RESULTS, [result], machine_description(), time.monotonic() - started)


if __name__ == "__main__":
    main()
