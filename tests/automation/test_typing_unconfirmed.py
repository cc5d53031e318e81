"""Keys a program could not be shown to have read: the step says "sent", never "typed", and the run says so.

The X11 backend returns Unconfirmed when keys on temporarily bound keycodes went to a program that
did not answer a _NET_WM_PING after them (automation.input.x11.unread; read back from real frozen
programs in tests/automation/test_typing_freeze.py). Here a stand-in backend returns it, so the
words of the input performer and the engine's run summary are checked without a display.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from holodesk.automation.actions import Action, Done, KeyCombo, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import Monitor, Rect
from holodesk.automation.engine_protocols import Outcome
from holodesk.automation.input.backend import InputCapabilities, Unconfirmed
from holodesk.automation.input.injected import InjectedInput
from holodesk.automation.input.performer import ExecutionResult, InputPerformer
from holodesk.automation.input.plan import InputTarget
from holodesk.automation.input.primitives import Primitive, TypedText
from holodesk.automation.trajectory import read_session
from tests.automation.test_engine import ListPolicy, RecordingPerformer, ScriptedApprover, make_engine

WHY = "XTerm does not answer _NET_WM_PING, so that it read them cannot be known"


class SentUnconfirmed:
    """An input backend whose typed text (and, with `keys_too`, key presses) goes out unconfirmed."""

    def __init__(self, keys_too: bool = False) -> None:
        self.keys_too = keys_too
        self.performed: list[Primitive] = []

    @property
    def capabilities(self) -> InputCapabilities:
        return InputCapabilities("stand-in", knows_focused_program=True, refuses_corners=False)

    @property
    def injected(self) -> InjectedInput:
        return InjectedInput()

    def monitors(self) -> tuple[Monitor, ...]:
        return (Monitor(1, Rect(0, 0, 800, 600)),)

    def input_target(self, action: Action) -> InputTarget:
        return InputTarget("XTerm", ("ctrl", "a"), ("shift", "insert"))

    def check(self, step: Primitive) -> None:
        pass

    @contextmanager
    def acting(self, action: Action, steps: tuple[Primitive, ...]) -> Iterator[None]:
        yield

    def perform(self, step: Primitive, cancel: CancelToken) -> str | Unconfirmed:
        self.performed.append(step)
        if isinstance(step, TypedText) or self.keys_too:
            return Unconfirmed(WHY)
        return ""

    def close(self) -> None:
        pass


def test_text_whose_keys_were_not_confirmed_is_said_sent_not_typed() -> None:
    result = InputPerformer(SentUnconfirmed()).execute(TypeText("a/b > c"))
    assert result.ok and result.unconfirmed == WHY
    assert result.detail.startswith("sent the keys of 'a/b > c'"), result.detail
    assert "could not be confirmed" in result.detail and WHY in result.detail
    assert "typed" not in result.detail and not result.detail.startswith("type ")


def test_with_enter_only_the_text_is_unconfirmed_and_enter_is_still_said_pressed() -> None:
    result = InputPerformer(SentUnconfirmed()).execute(TypeText("ls", press_enter=True))
    assert result.unconfirmed == WHY and "typed" not in result.detail
    assert result.detail.endswith("; pressed enter"), result.detail


def test_a_key_combination_not_confirmed_is_said_sent() -> None:
    result = InputPerformer(SentUnconfirmed(keys_too=True)).execute(KeyCombo(("ctrl", "a")))
    assert result.unconfirmed == WHY
    assert result.detail.startswith("press ctrl+a: sent, but") and WHY in result.detail, result.detail


def test_a_confirmed_text_is_still_said_typed() -> None:
    """The control: a backend that confirms (returns words) keeps the usual result."""

    class Confirming(SentUnconfirmed):
        def perform(self, step: Primitive, cancel: CancelToken) -> str | Unconfirmed:
            return ""

    result = InputPerformer(Confirming()).execute(TypeText("ls", press_enter=True))
    assert result.unconfirmed == "" and "typed 'ls'" in result.detail


def test_the_run_summary_names_the_steps_whose_text_was_not_confirmed(tmp_path) -> None:
    class Unconfirming(RecordingPerformer):
        def execute(self, action, cancel):
            self.executed.append(action)
            if isinstance(action, TypeText) and action.text == "a/b":
                return ExecutionResult(action, True, f"sent the keys of 'a/b', but ...: {WHY}", 0.01, unconfirmed=WHY)
            return ExecutionResult(action, True, action.describe(), 0.0)

    policy = ListPolicy([TypeText("ok"), TypeText("a/b"), Done("all typed")])
    engine, _, _ = make_engine(policy, ScriptedApprover(), Unconfirming(), tmp_path=tmp_path)
    result = engine.run("type it")
    assert result.outcome is Outcome.DONE
    assert result.detail.startswith("all typed; the text of step 2 was sent but could not be confirmed"), result.detail
    assert WHY in result.detail and "step 1" not in result.detail
    session = read_session(result.folder)
    assert session.end is not None and session.outcome == "done"
    assert "step 2 was sent but could not be confirmed" in session.end["detail"]
    assert session.steps[1]["result"]["unconfirmed"] == WHY and "unconfirmed" not in session.steps[0]["result"]
