"""First contact: a degenerate answer is named; figures and kernels are reported for the loaded engine."""

from __future__ import annotations

import pytest
import torch

from holodesk.inference.engine.check import degenerate, first_contact, kernels_available
from holodesk.inference.engine.runner import Engine
from holodesk.inference.profiles.base import ChatRequest

from .test_runner import _conversation


@pytest.mark.parametrize(
    ("tokens", "problem"),
    [
        ((), "empty"),
        ((37,) * 32, "repeats"),
        ((5, 9, *(37,) * 8), "repeats"),
        ((37, 26, 43, 37, 26, 43, 37, 26, 43), None),
        ((1, 1, 1, 2, 2, 2, 3), None),
    ],
)
def test_degenerate_answers_are_named(tokens: tuple[int, ...], problem: str | None) -> None:
    found = degenerate(tokens)
    assert (found is None) if problem is None else (problem in (found or ""))


def test_first_contact_reports_the_engines_figures(engine: Engine) -> None:
    report = first_contact(engine, _conversation(1), bandwidth_tb_s=1.0)
    assert report.prompt_tokens > 1000 and report.new_tokens >= 1
    assert report.prefill_tokens_per_s > 0 and report.decode_ms_per_token > 0
    assert report.decode_floor_ms is not None and 0 < report.decode_floor_ms < report.decode_ms_per_token
    assert report.peak_memory_kind == "process RSS" and report.peak_memory_bytes > 0
    text = "\n".join(report.lines())
    assert "tokens/s" in text and "ms/token" in text and "mamba-ssm chunk scan: no" in text


def test_first_contact_flags_a_model_that_repeats_one_token(engine: Engine) -> None:
    # A zeroed lm_head makes every logit equal: greedy picks the same (first) token at every step.
    head = engine.model.language_model.lm_head.weight
    saved = head.detach().clone()
    try:
        with torch.no_grad():
            head.zero_()
        request = ChatRequest(messages=[{"role": "user", "content": "hello"}], max_new_tokens=12)
        report = first_contact(engine, request)
    finally:
        with torch.no_grad():
            head.copy_(saved)
    assert report.problem is not None and "repeats" in report.problem
    assert "DEGENERATE" in report.lines()[0]


def test_no_kernel_is_claimed_on_a_cpu(engine: Engine) -> None:
    assert not any(kernels_available(engine.device).values())
