"""bench/holo31_ratio's report: its last line is exactly the issue's, from the medians of each round's ratios."""

from __future__ import annotations

import re

from bench.holo31_ratio import Pair, report

SETUP = {"build_s": 30.0, "operator_calls_per_token": 2000.0, "top_level_calls_per_token": 900.0}


def _pair(engine_prefill: float, engine_decode: float) -> Pair:
    return Pair(7306, engine_prefill, 100.0, engine_decode, 4.0, 20.0, 1298)


def test_the_last_line_is_the_median_of_the_rounds_ratios() -> None:
    # Per round: prefill 0.5, 2.0, 1.2 (median 1.2); decode 0.25, 1.5, 0.75 (median 0.75). The ratio of the
    # medians would be the same here only by chance: engine medians 120 and 3.0 over 100 and 4.0 -> 1.2, 0.75.
    pairs = [_pair(50.0, 1.0), _pair(200.0, 6.0), _pair(120.0, 3.0)]
    lines = report(pairs, SETUP)
    assert lines[-1] == "prefill engine/vLLM 1.20, decode engine/vLLM 0.75"
    assert re.fullmatch(r"prefill engine/vLLM \d+\.\d\d, decode engine/vLLM \d+\.\d\d", lines[-1])


def test_paired_ratios_not_ratios_of_medians() -> None:
    # Round loads differ: vLLM's figures move with the engine's; each round's pair is compared.
    pairs = [
        Pair(7306, 50.0, 100.0, 1.0, 2.0, 20.0, 1298),
        Pair(7306, 150.0, 300.0, 3.0, 6.0, 20.0, 1298),
        Pair(7306, 400.0, 200.0, 8.0, 4.0, 20.0, 1298),
    ]
    assert report(pairs, SETUP)[-1] == "prefill engine/vLLM 0.50, decode engine/vLLM 0.50"
    text = "\n".join(report(pairs, SETUP))
    assert "2000 torch operator calls per decoded token (900 not inside another)" in text
    assert "build_s 30" in text and "operator_calls_per_token" not in text.split("set-up:")[1]
    assert "(bfloat16 instructions: " in text  # the ratio depends on them: the report says which ran
