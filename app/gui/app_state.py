"""What the app is doing, as the tray shows it: one state, a tooltip, an optional progress."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from holodesk.automation.engine_protocols import EngineState


class AppState(StrEnum):
    IDLE = "idle"
    LOADING = "loading"
    THINKING = "thinking"
    WAITING = "waiting"  # for the user's approval
    ASKING = "asking"  # the model asked the user a question
    ACTING = "acting"
    PAUSED = "paused"
    ERROR = "error"


_FROM_ENGINE = {
    EngineState.CAPTURING: AppState.THINKING,
    EngineState.THINKING: AppState.THINKING,
    EngineState.WAITING_APPROVAL: AppState.WAITING,
    EngineState.WAITING_ANSWER: AppState.ASKING,
    EngineState.SAVING: AppState.ACTING,  # approved; about to act once its screenshot is on disk
    EngineState.ACTING: AppState.ACTING,
    EngineState.SETTLING: AppState.ACTING,
    EngineState.PAUSED: AppState.PAUSED,
    EngineState.STEP_FAILED: AppState.ERROR,
    EngineState.NO_VISIBLE_CHANGE: AppState.ACTING,
    EngineState.FINISHED: AppState.IDLE,
}

_WORDS = {
    AppState.IDLE: "ready",
    AppState.LOADING: "loading the model",
    AppState.THINKING: "thinking",
    AppState.WAITING: "waiting for your approval",
    AppState.ASKING: "waiting for your answer",
    AppState.ACTING: "acting",
    AppState.PAUSED: "paused",
    AppState.ERROR: "error",
}


def from_engine(state: EngineState) -> AppState:
    return _FROM_ENGINE[state]


@dataclass(frozen=True, slots=True)
class StatusLine:
    """The state with the detail a person needs: the step, the action, the error, the load progress."""

    state: AppState
    detail: str = ""
    progress: float | None = None  # 0..1 while loading

    def tooltip(self) -> str:
        text = f"Holodesk: {_WORDS[self.state]}"
        if self.progress is not None:
            text += f" ({self.progress:.0%})"
        if self.detail:
            text += f"\n{self.detail}"
        return text
