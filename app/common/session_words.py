"""A recorded session in words, for the history window and `holodesk history`.

Each step says what actually ran (the edited action when the user changed it, not the proposal),
the decision, the result in words and its timings; a session says its task, when it started, how it
ended and how many steps were taken. Records are read defensively: an old or half-written session
still reads, with a dash where something is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from holodesk.automation.actions import Action, action_from_dict
from holodesk.automation.engine import NO_VISIBLE_CHANGE as NO_VISIBLE_CHANGE_WORDS
from holodesk.automation.errors import ActionError
from holodesk.automation.trajectory import REPLAY_VERDICT, Session

# Action kinds as a person reads them (the kinds themselves are names for files and prompts).
KIND_WORDS = {
    "click": "click",
    "move": "pointer move",
    "drag": "drag",
    "scroll": "scroll",
    "type": "typing",
    "key": "key press",
    "hold_and_tap": "hold-and-tap keys",
    "wait": "wait",
    "done": "finish",
    "ask_user": "question",
    "plan": "plan update",
}


def kind_in_words(kind: str) -> str:
    return KIND_WORDS.get(kind, kind.replace("_", " "))


def hotkey_in_words(hotkey: str) -> str:
    """A hotkey in pynput syntax as a keyboard shows it: "<ctrl>+<alt>+h" is "Ctrl+Alt+H"."""
    parts = []
    for part in hotkey.split("+") if hotkey != "+" else ["+"]:
        name = part.strip().removeprefix("<").removesuffix(">")
        parts.append(_KEY_WORDS.get(name.lower(), name.upper() if len(name) == 1 else name.title()))
    return "+".join(parts)


_KEY_WORDS = {"ctrl": "Ctrl", "alt": "Alt", "shift": "Shift", "cmd": "Super", "esc": "Esc", "enter": "Enter"}

DECISIONS = {
    "approve": "approved",
    "edit": "edited",
    "skip": "skipped",
    "stop": "stopped",
    "answered": "answered",
    "final": "finished",
}
OUTCOMES = {
    "done": "done",
    "ask_user": "asked you",
    "step_limit": "step limit",
    "stopped": "stopped",
    "error": "failed",
    "unfinished": "unfinished",
}


@dataclass(frozen=True, slots=True)
class StepWords:
    index: str
    decision: str  # approved, edited, skipped, stopped, answered, finished, or "-"
    ran: str  # what ran (or was asked, or was the final answer), in words
    proposed: str  # the proposal, when the user changed it; empty otherwise
    result: str  # the result in words: "ok", "failed: ...", "reply: ...", or ""
    timings: str  # "model 2.1 s, 1,234 tokens in · action 0.12 s", or ""


@dataclass(frozen=True, slots=True)
class SessionWords:
    task: str
    started: str  # "2026-11-22 22:41"
    outcome: str  # how it ended, in a few words: a replay's own ("stopped at step 2 of 3"), else the state
    state: str  # the outcome alone: done, stopped, failed, asked you, step limit, unfinished
    detail: str
    steps_taken: int


def _action(record: Any) -> Action | None:
    if not isinstance(record, dict):
        return None
    try:
        return action_from_dict(record)
    except (ActionError, KeyError, TypeError, ValueError):
        return None


def _table(step: dict[str, Any], key: str) -> dict[str, Any]:
    """A nested record of a step, or an empty one when it is missing or not a table."""
    value = step.get(key)
    return value if isinstance(value, dict) else {}


def _final_words(step: dict[str, Any]) -> str:
    model = _table(step, "action_model")
    kind = model.get("kind")
    if kind == "done":
        return str(model.get("answer") or "").strip() or "task finished"
    if kind == "ask_user":
        return f"asked: {str(model.get('question') or '').strip()}"
    return "task finished"


def step_words(step: dict[str, Any]) -> StepWords:
    decision = str(step.get("decision") or "")
    proposed_action = _action(step.get("action_screen"))
    edited_action = _action(step.get("edited_screen"))
    ran_action = edited_action or proposed_action
    if decision == "answered" or (decision in ("final", "stop") and ran_action is None and "action_model" in step):
        ran = _final_words(step)
    elif ran_action is not None:
        ran = ran_action.describe()
    else:
        ran = str(step.get("action_text") or "")
    error = str(step.get("error") or "")
    if not ran:
        ran = error or "-"
    proposed = proposed_action.describe() if edited_action is not None and proposed_action is not None else ""

    result = ""
    outcome = step.get("result")
    if isinstance(outcome, dict):
        detail = str(outcome.get("detail") or "").strip()
        verdict = step.get(REPLAY_VERDICT)
        if outcome.get("ok", True) and isinstance(verdict, dict):
            # A routine's step: the replay judged its effect on what it acted on, which says more than
            # the whole screen's "no visible change"; a flagged step is never shown as a plain "ok".
            flags = verdict.get("flags") or []
            said = str(verdict.get("detail") or detail)
            result = f"ran, flagged: {'; '.join(map(str, flags))}" if flags else (f"ok: {said}" if said else "ok")
        elif outcome.get("ok", True) and step.get("visible_change") is False:
            # It ran, and the screen stayed the same: flagged, never shown as a plain "ok".
            result = f"ran, {NO_VISIBLE_CHANGE_WORDS}" + (f": {detail}" if detail else "")
        elif outcome.get("ok", True):
            result = f"ok: {detail}" if detail else "ok"
        else:
            result = f"failed: {detail}" if detail else "failed"
    elif decision == "answered":
        result = f"you replied: {step.get('reply', '')}"
    elif error and ran != error:
        result = f"failed: {error}"

    parts: list[str] = []
    model = _table(step, "timings")
    total = model.get("total_s")
    if isinstance(total, int | float) and total > 0:
        tokens = model.get("tokens_in")
        parts.append(f"model {total:.1f} s" + (f", {tokens:,} tokens in" if isinstance(tokens, int) and tokens else ""))
    if isinstance(outcome, dict) and isinstance(outcome.get("duration_s"), int | float):
        parts.append(f"action {outcome['duration_s']:.2f} s")
    return StepWords(
        index=str(step.get("index", "?")),
        decision=DECISIONS.get(decision, decision or "-"),
        ran=ran,
        proposed=proposed,
        result=result,
        timings=" · ".join(parts),
    )


def _started(session: Session) -> str:
    stamp = session.header.get("time")
    if isinstance(stamp, str):
        try:
            return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M")
        except ValueError:
            pass
    return "-"


def session_words(session: Session) -> SessionWords:
    end = session.end or {}
    steps = end.get("steps")
    if not isinstance(steps, int):  # older sessions, or one that never finished: count what went through
        steps = sum(1 for s in session.steps if s.get("decision") in ("approve", "edit", "skip", "answered"))
    state = OUTCOMES.get(session.outcome, session.outcome)
    return SessionWords(
        task=session.task,
        started=_started(session),
        # A replay's end says where it stopped or was handed over (the engine's "summary"), not a plain "done".
        outcome=str(end.get("summary") or state),
        state=state,
        detail=str(end.get("detail") or ""),
        steps_taken=steps,
    )


def steps_in_words(count: int) -> str:
    return f"{count} step{'s' if count != 1 else ''}"
