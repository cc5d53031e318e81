"""Holodesk's own time per approved MCP `act`, the person's time left out.

A private Xvfb (1920x1080), the real capture and X11 input, the real StepEngine and session recording
(a temporary sessions folder), and `holodesk mcp`'s server driven by the MCP SDK's own client in-process.
Everything measured is Holodesk's: checking the arguments (one grab for the screen's size), the engine's
capture, proposal, checks and the step written ahead of its action (its screenshot on disk first), the
click itself, the wait for the screen to settle (two identical grabs begun one poll apart), and the
session's record. Two passes:

- back to back: the approver answers Approve the moment it is asked and the next call follows at once.
  The step's screenshot is still being encoded when the approval comes, so the action waits for it;
  the record an `act` closes after its answer (its last screenshot, its end line) is waited for by the
  next call before it starts. The goal (under 50 ms for the whole call) is set against this pass.
- paced: the person answers 0.3 s after being asked and the agent sends the next call 0.2 s after an
  answer, as a person and an agent's model take at least that long. What is left is what they wait for.

At the end every record is checked closed (the server's wait at exit) before the folder goes.

    python -m bench.mcp_overhead [--quick]      # writes bench/mcp_overhead_results.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import Client

from bench.harness import BenchResult, BenchSettings, format_table, machine_description, stats_of, write_results
from holodesk.app.mcp.desk import Desk
from holodesk.app.mcp.one_step import DeskParts
from holodesk.app.mcp.server import DeskServer
from holodesk.automation.backends import create_backends
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest
from holodesk.automation.trajectory import iter_session_folders, read_session
from holodesk.automation.virtual_display import FULL_HD, xvfb_display

NAME = "mcp_overhead"
GOAL_MS = 50.0
ROUNDS = 30
RESULTS = Path(__file__).resolve().parent / "mcp_overhead_results.json"


PERSON_S = 0.3  # the paced pass: how long the person takes to approve
AGENT_S = 0.2  # the paced pass: how long the agent takes before its next call
RECORDS_CLOSED_S = 30.0


class Approver:
    """Approves after `delay_s`, noting when it was asked and when it answered (perf_counter seconds)."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.asked_at: list[float] = []
        self.answered_at: list[float] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked_at.append(time.perf_counter())
        if self.delay_s:
            time.sleep(self.delay_s)
        self.answered_at.append(time.perf_counter())
        return ApprovalDecision.approve()


@dataclass
class Pass:
    """One pass's figures (milliseconds): the whole call less the person's time, until asked, after the answer."""

    totals: list[float] = field(default_factory=list)
    before: list[float] = field(default_factory=list)
    after: list[float] = field(default_factory=list)
    settle_poll_s: float = 0.0


def measure(rounds: int, warmup: int, person_s: float, agent_s: float) -> Pass:
    """`rounds` approved clicks on a fresh server and sessions folder, every record closed at the end."""
    figures = Pass()
    with tempfile.TemporaryDirectory() as folder:
        backends = create_backends()
        approver = Approver(person_s)
        desk = Desk(DeskParts(approver, backends.performer, backends.capture, Path(folder), 1), Path(folder))
        server = DeskServer(desk).server
        figures.settle_poll_s = desk.steps.settle_poll_s

        async def calls() -> None:
            async with Client(server) as client:
                for index in range(warmup + rounds):
                    started = time.perf_counter()
                    result = await client.call_tool("act", {"action": "click", "x": 100 + index, "y": 100})
                    ended = time.perf_counter()
                    if result.is_error:
                        raise RuntimeError(f"the act failed: {result.content}")
                    if index >= warmup:
                        asked, answered = approver.asked_at[-1], approver.answered_at[-1]
                        figures.totals.append((ended - started - (answered - asked)) * 1000)
                        figures.before.append((asked - started) * 1000)
                        figures.after.append((ended - answered) * 1000)
                    await anyio.sleep(agent_s)

        try:
            anyio.run(calls)
            if not desk.steps.wait_idle(RECORDS_CLOSED_S):
                raise RuntimeError(f"the sessions were not all closed within {RECORDS_CLOSED_S:g} s")
            for session in iter_session_folders(Path(folder)):
                if read_session(session).end is None:
                    raise RuntimeError(f"the session {session.name} has no end record")
        finally:
            backends.close()
    return figures


def run(settings: BenchSettings) -> BenchResult:
    rounds = 5 if settings.quick else max(settings.repeats, ROUNDS)
    with xvfb_display(FULL_HD):
        back_to_back = measure(rounds, settings.warmup, 0.0, 0.0)
        paced = measure(rounds, settings.warmup, PERSON_S, AGENT_S)
    result = BenchResult(NAME)
    result.add("act, whole call (approved at once)", stats_of(back_to_back.totals), goal=GOAL_MS)
    result.add("act, until the person is asked", stats_of(back_to_back.before))
    result.add("act, after the approval (click, settle, record)", stats_of(back_to_back.after))
    result.add("act paced, whole call less the person's 0.3 s", stats_of(paced.totals), goal=GOAL_MS)
    result.add("act paced, until the person is asked", stats_of(paced.before))
    result.add("act paced, after the approval (click, settle)", stats_of(paced.after))
    result.notes.append(
        f"{rounds} clicks a pass on a bare 1920x1080 Xvfb; the settle wait is two identical grabs begun one poll"
        f" ({back_to_back.settle_poll_s * 1000:g} ms) apart, part of 'after the approval';"
        f" paced: the person approves {PERSON_S:g} s after being asked, the agent calls {AGENT_S:g} s after an answer"
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
