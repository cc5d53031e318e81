"""One prefill call of a Gated DeltaNet layer's chunked delta rule on the CPU: transformers' float32
function against the engine's bfloat16 one (inference/engine/qwen35_delta_rule.py), side by side.

Holo3.1-0.8B's shapes: 16 heads of 128 key and value dimensions, a 256-token call (the engine's CPU
prefill chunk; a 7,306-token prompt makes 522 such calls in its 18 DeltaNet layers), bfloat16 inputs
as the layer gives them, a state carried in. The two are timed interleaved, round by round; the
ratio is per round. Beside the times, each one's largest error against the rule run token by token
in float64, relative to the largest value: how much precision the speed costs.

    python -m bench --only deltanet_cpu        # or: python -m bench.deltanet_cpu [--quick] [--output F]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench.harness import BenchResult, BenchSettings, interleaved, report, stats_of
from holodesk.inference.engine.spec import transformers_problem

if TYPE_CHECKING:
    import torch

NAME = "deltanet_cpu"
TOKENS, HEADS, DIM = 256, 16, 128


def run(settings: BenchSettings) -> BenchResult:
    # heavy: torch, transformers
    import torch
    from transformers.models.qwen3_5 import modeling_qwen3_5

    # heavy: torch
    from holodesk.inference.engine.qwen35_delta_rule import chunked_delta_rule_bf16

    result = BenchResult(NAME)
    problem = transformers_problem()
    if problem:
        result.notes.append(f"not run: {problem}")
        return result
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, TOKENS, HEADS, DIM, generator=generator).to(torch.bfloat16) for _ in range(3))
    g = -torch.rand(1, TOKENS, HEADS, generator=generator) * 0.5
    beta = torch.rand(1, TOKENS, HEADS, generator=generator).to(torch.bfloat16)
    state = torch.randn(1, HEADS, DIM, DIM, generator=generator) * 0.3

    def transformers_rule() -> tuple[torch.Tensor, torch.Tensor]:
        return modeling_qwen3_5.torch_chunk_gated_delta_rule(
            q, k, v, g=g, beta=beta, initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True
        )

    def bf16_rule() -> tuple[torch.Tensor, torch.Tensor | None]:
        return chunked_delta_rule_bf16(q, k, v, g, beta, state, output_final_state=True)

    cases = {"transformers' float32 function": transformers_rule, "bfloat16 products (the engine's)": bf16_rule}
    rounds = 3 if settings.quick else settings.rounds(15)
    with torch.inference_mode():
        times = interleaved(cases, rounds, warmup=settings.warmup)
        exact_out, exact_state = recurrence(q, k, v, g, beta, state)
        errors = {name: _relative_errors(case(), exact_out, exact_state) for name, case in cases.items()}
    baseline = "transformers' float32 function"
    call = f"a {TOKENS}-token call"
    for name, stats in times.items():
        result.add(f"{name}: {call}", stats, baseline=None if name == baseline else f"{baseline}: {call}")
    ratios = [
        a / b for a, b in zip(times[baseline].samples, times["bfloat16 products (the engine's)"].samples, strict=True)
    ]
    result.add("transformers' / bfloat16 time, per round", stats_of(ratios, "x"))
    for name, (out_error, state_error) in errors.items():
        result.add(f"{name}: output error, of the largest value", stats_of([out_error], "ratio"))
        result.add(f"{name}: final state error, of the largest value", stats_of([state_error], "ratio"))
    result.notes.append(
        f"{HEADS} heads x {DIM}, {TOKENS} tokens, bfloat16 inputs, {torch.get_num_threads()} threads; errors against "
        "the rule token by token in float64"
    )
    return result


def recurrence(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, state: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule's definition, token by token in float64: (outputs, final state).

    Decay the state, read what it predicts for the key, write beta times the difference, read the
    query (queries and keys L2-normalised, queries scaled by dim^-0.5). Written here, apart from the
    engine's chunked algorithms, as the oracle this benchmark and the tests hold them to.
    """
    # heavy: torch
    import torch

    q, k, v = (x.double() for x in (q, k, v))
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) / q.shape[-1] ** 0.5
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    s = state.double().clone()
    outputs = []
    for t in range(q.shape[1]):
        s = s * g[:, t].double().exp()[..., None, None]
        predicted = torch.einsum("bhkv,bhk->bhv", s, k[:, t])
        s = s + torch.einsum("bhk,bhv->bhkv", k[:, t], (v[:, t] - predicted) * beta[:, t].double()[..., None])
        outputs.append(torch.einsum("bhkv,bhk->bhv", s, q[:, t]))
    return torch.stack(outputs, 1), s


def _relative_errors(
    answer: tuple[torch.Tensor, torch.Tensor | None], exact_out: torch.Tensor, exact_state: torch.Tensor
) -> tuple[float, float]:
    out, final = answer
    assert final is not None  # asked for
    return (
        float((out.double() - exact_out).abs().max() / exact_out.abs().max()),
        float((final.double() - exact_state).abs().max() / exact_state.abs().max()),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.deltanet_cpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="three rounds: a smoke run")
    parser.add_argument("--output", type=Path, help="also write the JSON results here")
    arguments = parser.parse_args(argv)
    started = time.perf_counter()
    report(run(BenchSettings(quick=arguments.quick)), arguments.output, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
