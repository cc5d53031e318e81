"""A backend that answers from a script of model outputs instead of running a model.

Used by tests and demos: the answers are real-shaped model text, so the profile's parser and the
engine's coordinate mapping run for real. A script is a JSONL file, one answer a line, each a JSON
string or an object with a "text" field.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from holodesk.inference.errors import BackendError
from holodesk.inference.generation import Generation
from holodesk.inference.policy import StepTimings
from holodesk.inference.profiles.base import ChatRequest


class ScriptedBackend:
    """Returns the scripted answers in order; running out is a BackendError, not a guess."""

    def __init__(self, answers: Iterable[str], delay_s: float = 0.0) -> None:
        self._answers = list(answers)
        self._next = 0
        self._lock = threading.Lock()
        self.delay_s = delay_s
        self.requests: list[ChatRequest] = []

    @classmethod
    def from_file(cls, path: Path, delay_s: float = 0.0) -> ScriptedBackend:
        answers: list[str] = []
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise BackendError(f"cannot read the script {path}: {exc}") from exc
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise BackendError(f"{path}:{number}: not a JSON line ({exc})") from exc
            if isinstance(value, dict) and isinstance(value.get("text"), str):
                value = value["text"]
            if not isinstance(value, str):
                raise BackendError(f'{path}:{number}: expected a JSON string or {{"text": ...}}')
            answers.append(value)
        if not answers:
            raise BackendError(f"the script {path} has no answers")
        return cls(answers, delay_s)

    @property
    def remaining(self) -> int:
        return len(self._answers) - self._next

    def generate(self, request: ChatRequest) -> Generation:
        started = time.perf_counter()
        with self._lock:
            self.requests.append(request)
            if self._next >= len(self._answers):
                raise BackendError(f"the script is exhausted after {len(self._answers)} answers")
            text = self._answers[self._next]
            self._next += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        elapsed = time.perf_counter() - started
        return Generation(text, StepTimings(total_s=elapsed, decode_s=elapsed, tokens_out=len(text.split())))
