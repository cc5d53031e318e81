"""Figure 2: parsing one model answer into one action, per profile, on valid and malformed answers.

The answers are shaped like real ones: a JSON step with note and thought, one after a `<think>`
block of a few hundred words, fenced and wrapped in prose, a tool call; and the usual failures
(cut off by the token limit, an unknown action, a coordinate out of range, prose only, two calls).
Each figure is the time per answer, averaged over one pass through the set, in microseconds.
The baseline is the floor under any parser: `json.loads` of each answer's bare JSON object
(holotron, holo1.5), or one regex search for the `Name(args)` call (holo1).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Sequence

from bench.harness import BenchResult, BenchSettings, Stats, interleaved
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
)
HOLOTRON_MALFORMED = (
    _step({"name": "click_desktop", "x": 412, "y": 318}, "3 unread", "Open the first unread message.")[:60],
    _step({"name": "tap_screen", "x": 412, "y": 318}, "", "Tap it."),
    _step({"name": "click_desktop", "x": 1200, "y": 318}, "", "Click the button on the right."),
    "I would click the Archive button in the toolbar, then confirm.",
    f"<think>{_REASONING}",  # cut off inside the reasoning
    _step({"name": "click_desktop", "x": 1, "y": 2}, "", "") + _step({"name": "answer", "content": "x"}, "", ""),
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


def run(settings: BenchSettings) -> BenchResult:
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
    return result
