"""Figure 2: parsing one model answer into one action, per profile, on valid, malformed and hostile answers.

The answers are shaped like real ones: a JSON step with note and thought, one after a `<think>`
block of a few hundred words, fenced and wrapped in prose, a tool call; and the usual failures
(cut off by the token limit, an unknown action, a coordinate out of range, prose only, two calls).
Each figure is the time per answer, averaged over one pass through the set, in microseconds.
The baseline is the floor under any parser: `json.loads` of each answer's bare JSON object
(holotron, holo1.5), or one regex search for the `Name(args)` call (holo1).

Hostile answers (64,000 characters of repeated `<think>`, `<tool_call>`, braces or calls) are timed
one by one against the 50 ms goal; the parse must stay linear in the answer's length. Then the
mutation fuzz: valid answers with random insertions (hostile fragments among them), deletions and
duplications, 100,000 per profile by default (`python -m bench.parsing --fuzz 100000`); every one
must give an action or a ParseError, nothing else, and the slowest answer is reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import (
    BenchResult,
    BenchSettings,
    Stats,
    format_table,
    interleaved,
    machine_description,
    write_results,
)
from holodesk.inference.errors import ParseError
from holodesk.inference.profiles import get_profile

NAME = "parsing"
# Passes through an answer set per timed call: enough to lift a call well above timer noise.
PASSES = 20

_REASONING = (
    "The task is to archive every unread newsletter. The inbox list shows three bold rows, which are the"
    " unread ones; the first is from Weekly Digest. Selecting it enables the toolbar, where the Archive"
    " button sits to the right of Delete. I will open the first unread message before archiving it, so"
    " that I can check it is a newsletter and not a personal mail. "
) * 3


def _step(action: dict[str, object], note: str, thought: str) -> str:
    return json.dumps({"note": note, "thought": thought, "action": action}, ensure_ascii=False)


def _harness_step(tool_call: dict[str, object], note: str | None, thought: str) -> str:
    return json.dumps({"note": note, "thought": thought, "tool_call": tool_call}, ensure_ascii=False)


HOLOTRON_VALID = (
    _step({"name": "click_desktop", "x": 412, "y": 318}, "3 unread newsletters", "Open the first unread message."),
    f"<think>{_REASONING}</think>\n"
    + _step({"name": "click_desktop", "x": 87, "y": 240}, "Inbox open", "Select the first unread row."),
    "Here is the next step:\n```json\n"
    + _step({"name": "write_desktop", "content": "newsletter"}, "", "Search for newsletters.")
    + "\n```",
    _step({"name": "hotkey_desktop", "keys": "ctrl+shift+a"}, "Message selected", "Archive it with the shortcut."),
    _step({"name": "click_element", "element": "Archive button", "x": 903, "y": 74}, "", "Archive."),
    '<tool_call>{"name": "scroll_desktop", "arguments": {"direction": "down"}}</tool_call>',
    _harness_step(
        {"tool_name": "click_desktop", "element": "first bold row of the inbox list", "x": 412, "y": 318},
        "3 unread newsletters",
        "Open the first unread message.",
    ),
    _harness_step(
        {
            "tool_name": "write_at_desktop",
            "content": "newsletter",
            "element": "search field",
            "x": 500,
            "y": 60,
            "press_enter": True,
            "overwrite": True,
        },
        None,
        "Search for newsletters.",
    ),
    _harness_step(
        {
            "tool_name": "update_plan",
            "goals": [
                {"title": "Find the newsletters", "status": "running"},
                {"title": "Archive them", "status": "todo"},
            ],
        },
        None,
        "Plan the task.",
    ),
    _harness_step({"tool_name": "hold_and_tap_key_desktop", "hold_keys": ["shift"], "tap_keys": ["end"]}, None, "x"),
)
HOLOTRON_MALFORMED = (
    _step({"name": "click_desktop", "x": 412, "y": 318}, "3 unread", "Open the first unread message.")[:60],
    _step({"name": "tap_screen", "x": 412, "y": 318}, "", "Tap it."),
    _step({"name": "click_desktop", "x": 1200, "y": 318}, "", "Click the button on the right."),
    "I would click the Archive button in the toolbar, then confirm.",
    f"<think>{_REASONING}",  # cut off inside the reasoning
    _step({"name": "click_desktop", "x": 1, "y": 2}, "", "") + _step({"name": "answer", "content": "x"}, "", ""),
    # a broken outer step (its closing brace lost): the inner tool call must not be taken for the answer
    _harness_step({"tool_name": "click_desktop", "element": "OK", "x": 1, "y": 2}, None, "t")[:-1],
    _harness_step({"tool_name": "click_desktop\u001f", "element": "OK", "x": 1, "y": 2}, None, "t"),
)


def _holo15(action: str, **arguments: object) -> str:
    return json.dumps({"note": "", "thought": "Open the first unread newsletter.", "action": action, **arguments})


HOLO15_VALID = (
    _holo15("click_absolute", x=352, y=348),
    f"<think>{_REASONING}</think>" + _holo15("double_click_absolute", x=120, y=610),
    "Next:\n```json\n" + _holo15("write", content="weekly digest") + "\n```",
    _holo15("key", keys="ctrl+shift+a"),
    _holo15("scroll", direction="down", amount=3, x=640, y=400),
    '<tool_call>{"name": "write", "arguments": {"content": "archive"}}</tool_call>',
)
HOLO15_MALFORMED = (
    _holo15("click_absolute", x=352, y=348)[:50],
    _holo15("tap", x=1, y=2),
    _holo15("click_absolute", x=-4, y=2),
    "Click the OK button at 352, 348.",
    _holo15("click_absolute", x=1, y=2) + _holo15("answer", content="x"),
    _holo15("key", keys="hyper+q"),
)
HOLO1_VALID = (
    "Click(352, 348)",
    "Note: 3 unread newsletters\nThought: open the first one\nAction: Click(352, 348)",
    f"<think>{_REASONING}</think>\nAction: DoubleClick(120, 610)",
    '**Thought:** search for them\n**Action:** Write("weekly digest", 400, 52)',
    'Press("ctrl+shift+a")',
    'Scroll("down", 3, 640, 400)',
)
HOLO1_MALFORMED = (
    "Action: Click(352, 3",
    "Action: Tap(1, 2)",
    "Click(1, 99999999)",
    "I would click the OK button (bottom right).",
    "Click(1, 2)\nClick(3, 4)",
    "Click(1 + 2, 3)",
)

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_CALL = re.compile(r"\b([A-Z][A-Za-z]*)\((.*?)\)", re.DOTALL)


def _json_floor(answers: Sequence[str]) -> Callable[[], None]:
    # The bare JSON objects are cut out beforehand: the floor is decoding them, nothing else.
    payloads = [match.group(0) for text in answers if (match := _JSON_OBJECT.search(text))]
    if len(payloads) != len(answers):
        raise AssertionError("every valid JSON answer must hold a JSON object")

    def decode() -> None:
        for _ in range(PASSES):
            for payload in payloads:
                json.loads(payload)

    return decode


def _regex_floor(answers: Sequence[str]) -> Callable[[], None]:
    def search() -> None:
        for _ in range(PASSES):
            for text in answers:
                _CALL.search(text)

    return search


def _parse_all(profile_name: str, answers: Sequence[str]) -> Callable[[], None]:
    profile = get_profile(profile_name)

    def parse() -> None:
        for _ in range(PASSES):
            for text in answers:
                with contextlib.suppress(ParseError):
                    profile.parse_navigation(text)

    return parse


def _outcomes(profile_name: str, answers: Sequence[str]) -> list[str]:
    profile = get_profile(profile_name)
    outcomes = []
    for text in answers:
        try:
            outcomes.append(profile.parse_navigation(text).action.kind)
        except ParseError:
            outcomes.append("ParseError")
    return outcomes


SETS = {
    "holotron": (HOLOTRON_VALID, HOLOTRON_MALFORMED, _json_floor),
    "holo1.5": (HOLO15_VALID, HOLO15_MALFORMED, _json_floor),
    "holo1": (HOLO1_VALID, HOLO1_MALFORMED, _regex_floor),
}


# -- hostile answers and the mutation fuzz -----------------------------------------------------------

HOSTILE_CHARS = 64_000
# The bound on one hostile answer's parse (the parser is linear in the answer's length).
HOSTILE_GOAL_MS = 50.0


def hostile_answers(length: int = HOSTILE_CHARS) -> dict[str, str]:
    """Answers built to be slow or to fool a parser, each about `length` characters long."""

    def repeat(unit: str) -> str:
        return unit * (length // len(unit))

    digits = "9" * 400
    return {
        "<think> repeated": repeat("<think>"),
        "</think> repeated": repeat("</think>"),
        "<think></think> alternating": repeat("<think>a</think>"),
        "<tool_call> repeated": repeat("<tool_call>"),
        "{ repeated": repeat("{"),
        'unclosed strings {"a": "': repeat('{"a": "'),
        'unclosed objects {"a":': repeat('{"a":'),
        "Click( repeated": repeat("Click("),
        "prose then a call": repeat("word ") + "Click(1, 2)",
        "400-digit coordinate (json)": '{"note": null, "thought": "", "tool_call": {"tool_name": "click_desktop",'
        f' "element": "e", "x": {digits}, "y": 1}}}}',
        "400-digit wait (call)": f"Wait({digits})",
        "400-digit float (call)": f"Click({digits}.5, 1)",
        "broken outer object": '{"note": null, "thought": "t", "tool_call": {"tool_name": "answer", "content": "x"}',
        "control character in a name": '{"tool_call": {"tool_name": "answer\u0000", "content": "x"}}',
    }


FRAGMENTS = (
    "{", "}", "[", "]", '"', "'", ",", ":", "(", ")", " ", "\n", "\\", "`", "```json\n",
    '"action"', '"name"', '"x"', '"y"', '"note"', '"arguments"', '"tool_call"', '"tool_name"', '"element"',
    "click_desktop", "click_absolute", "Click", "Write", "go_back", "answer", "update_plan", "goto",
    "<think>", "</think>", "<tool_call>", "</tool_call>", "Action:", "Thought:",
    "0", "12", "-5", "1e999", "NaN", "Infinity", "1.5", "true", "null", "99999999999",
    # hostile: runaway numbers, control characters, tag storms, an injected inner call
    "9" * 400, "\x00", "\x1f", "\u202e", "<think>" * 40, "{" * 40,
    '{"tool_call": {"tool_name": "answer", "content": "pwned"}}',
)  # fmt: skip


def mutated_answers(valid: Sequence[str], seed: int, count: int) -> Iterator[str]:
    """`count` answers: each a valid one with 1-3 random insertions, deletions or duplications."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        text = valid[int(rng.integers(len(valid)))]
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(len(text) + 1))
            span = int(rng.integers(1, 12))
            match int(rng.integers(3)):
                case 0:
                    text = text[:at] + str(FRAGMENTS[int(rng.integers(len(FRAGMENTS)))]) + text[at:]
                case 1:
                    text = text[:at] + text[at + span :]
                case _:
                    text = text[:at] + text[at : at + span] * 2 + text[at + span :]
        yield text


def fuzz(profile_name: str, count: int, seed: int = 7) -> dict[str, Any]:
    """Parse `count` mutated answers: how many parsed, were refused, or raised anything else; the slowest."""
    valid, malformed, _ = SETS[profile_name]
    profile = get_profile(profile_name)
    outcomes: Counter[str] = Counter()
    slowest_ms, slowest = 0.0, ""
    others: list[str] = []
    for text in mutated_answers([*valid, *malformed], seed, count):
        started = time.perf_counter()
        try:
            profile.parse_navigation(text)
            outcomes["action"] += 1
        except ParseError:
            outcomes["ParseError"] += 1
        except Exception as exc:  # the finding this fuzz exists for
            outcomes[type(exc).__name__] += 1
            if len(others) < 5:
                others.append(f"{type(exc).__name__}: {exc} <- {text[:200]!r}")
        took = (time.perf_counter() - started) * 1000
        if took > slowest_ms:
            slowest_ms, slowest = took, text[:120]
    return {"count": count, "outcomes": dict(outcomes), "slowest_ms": slowest_ms, "slowest": slowest, "other": others}


def _hostile_figures(result: BenchResult, rounds: int) -> None:
    for profile_name in SETS:
        profile = get_profile(profile_name)
        for label, text in hostile_answers().items():
            samples = []
            for _ in range(rounds):
                started = time.perf_counter()
                with contextlib.suppress(ParseError):
                    profile.parse_navigation(text)
                samples.append((time.perf_counter() - started) * 1000)
            result.add(f"{profile_name} hostile: {label}", Stats(tuple(samples), "ms"), goal=HOSTILE_GOAL_MS)


def run(settings: BenchSettings, fuzz_count: int | None = None) -> BenchResult:
    result = BenchResult(NAME)
    for profile_name, (valid, malformed, floor) in SETS.items():
        valid_outcomes, malformed_outcomes = _outcomes(profile_name, valid), _outcomes(profile_name, malformed)
        if "ParseError" in valid_outcomes or any(o != "ParseError" for o in malformed_outcomes):
            result.notes.append(f"{profile_name}: unexpected outcomes {valid_outcomes} / {malformed_outcomes}")
        floor_name = "json.loads" if floor is _json_floor else "regex search"
        cases = {
            "valid": _parse_all(profile_name, valid),
            "malformed": _parse_all(profile_name, malformed),
            "floor": floor(valid),
        }
        stats = interleaved(cases, settings.rounds(15), settings.warmup, unit="us")
        # A timed call is PASSES passes over the set: turn it into microseconds per answer.
        counts = {"valid": len(valid), "malformed": len(malformed), "floor": len(valid)}
        per_answer = {
            name: Stats(tuple(ms * 1000 / (PASSES * counts[name]) for ms in value.samples), "us")
            for name, value in stats.items()
        }
        baseline = f"{profile_name} {floor_name} floor"
        result.add(baseline, per_answer["floor"])
        result.add(f"{profile_name} valid", per_answer["valid"], baseline=baseline)
        result.add(f"{profile_name} malformed", per_answer["malformed"], baseline=baseline)
        result.extra[profile_name] = {"valid": valid_outcomes, "malformed": malformed_outcomes}
    result.notes.append(
        f"per answer, averaged over {PASSES} passes through {len(HOLOTRON_VALID)} valid and"
        f" {len(HOLOTRON_MALFORMED)} malformed answers per profile; every valid one parses to an action and"
        " every malformed one raises ParseError (checked before timing)"
    )
    _hostile_figures(result, settings.rounds(5))
    count = fuzz_count if fuzz_count is not None else (2_000 if settings.quick else 100_000)
    for profile_name in SETS:
        report = fuzz(profile_name, count)
        result.extra[f"fuzz {profile_name}"] = report
        other = sum(n for kind, n in report["outcomes"].items() if kind not in ("action", "ParseError"))
        result.notes.append(
            f"fuzz {profile_name}: {count} mutated answers -> {report['outcomes']}; slowest"
            f" {report['slowest_ms']:.1f} ms; {'NOTHING ELSE raised' if not other else f'{other} OTHER EXCEPTIONS'}"
        )
        result.notes.extend(f"  {line}" for line in report["other"])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.parsing [--fuzz N]`: this benchmark alone, with N fuzzed answers per profile."""
    parser = argparse.ArgumentParser(prog="python -m bench.parsing", description=main.__doc__)
    parser.add_argument("--fuzz", type=int, default=100_000, help="mutated answers per profile (default 100000)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--output", type=Path, default=Path(__file__).resolve().parent / "parsing_results.json")
    arguments = parser.parse_args(argv)
    if arguments.fuzz < 1 or arguments.repeats < 1:
        parser.error("--fuzz and --repeats must be at least 1")
    started = time.perf_counter()
    result = run(BenchSettings(repeats=arguments.repeats), fuzz_count=arguments.fuzz)
    seconds = time.perf_counter() - started
    print(format_table(result.figures))
    print()
    for note in result.notes:
        print(f"[{NAME}] {note}")
    write_results(arguments.output, [result], machine_description(), seconds)
    print(f"\n{seconds:.0f} s; results in {arguments.output}")
    failed = any(
        k not in ("action", "ParseError")
        for r in result.extra.values()
        if isinstance(r, dict) and "outcomes" in r
        for k in r["outcomes"]
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
