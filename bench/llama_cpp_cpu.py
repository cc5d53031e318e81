"""llama.cpp against Holodesk's engine on Holo3.1-0.8B's shapes, on this CPU, side by side in one run.

Issue: is llama.cpp (through llama-cpp-python) a faster way to run the small Holo models without a GPU?
One checkpoint with Holo3.1-0.8B's real shapes and random weights (bench/qwen35_tiny's "holo31-0.8b",
bfloat16) is loaded by the engine (`Qwen35Engine`, in this process) and, converted to GGUF by
llama.cpp's own converter (bfloat16 kept), by llama.cpp. Both get the same token ids: the holo3.1
navigation request's text with its screenshot left out (llama.cpp's image path, libmtmd, is not part of
llama-cpp-python's low-level API; the ViT's share of a step is the engine's own figure in
bench/holo31_cpu_step), then NEW_TOKENS greedy tokens with the end of turn ignored. Each round runs
both, in alternating order, from an empty state: prefill tokens/s, then decode tokens/s.

    python -m bench.llama_cpp_cpu --llama-cpp-source DIR [--quick]

DIR is a llama.cpp source tree (for its convert_hf_to_gguf.py; llama-cpp-python's sdist has one under
vendor/llama.cpp), and llama-cpp-python must be installed (it compiles llama.cpp). The random model's
tokenizer is the tiny trained one, which the converter does not know by its hash: it is named as
Qwen3.5's ("qwen35") for the conversion, which changes nothing measured here (ids go in, not text).
The LAST line printed is `prefill llama.cpp/engine R1, decode llama.cpp/engine R2` (above 1: llama.cpp
is faster).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import BenchResult, format_table, machine_description, stats_of, write_results
from bench.holo31_cpu_step import QUICK_VARIANT, VARIANT, navigation_request
from holodesk.inference.profiles.base import ChatRequest

NEW_TOKENS = 32
ROUNDS = 3
RESULTS = Path(__file__).with_name("llama_cpp_cpu_results.json")
# Runs llama.cpp's converter with the tiny tokenizer named as Qwen3.5's (see the docstring).
CONVERT = """
import sys
sys.path.insert(0, sys.argv[1])
sys.argv = ["convert_hf_to_gguf.py", *sys.argv[2:]]
import convert_hf_to_gguf as convert
from conversion.base import TextModel
TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen35"
convert.main()
"""


def text_only(request: ChatRequest) -> ChatRequest:
    """The request with its images left out of the messages (their text kept)."""
    messages = []
    for message in request.messages:
        content = message["content"]
        if isinstance(content, list):
            content = [part for part in content if part.get("type") != "image"]
        messages.append({**message, "content": content})
    return dataclasses.replace(request, messages=messages, images=[], max_new_tokens=NEW_TOKENS)


def convert(checkpoint: Path, source: Path, out: Path) -> Path:
    gguf = out / "model-bf16.gguf"
    options = ["--outtype", "bf16", "--no-mtp", "--outfile", str(gguf)]  # no multi-token head: not measured
    done = subprocess.run(
        [sys.executable, "-c", CONVERT, str(source), str(checkpoint), *options],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "PYTHONPATH": str(source / "gguf-py")},
    )
    if done.returncode != 0:
        raise SystemExit(f"llama.cpp's converter failed:\n{done.stderr[-3000:]}")
    return gguf


def engine_round(engine: Any, request: ChatRequest) -> tuple[int, float, float]:
    engine.forget()
    result = engine.generate(request, max_new_tokens=NEW_TOKENS, ignore_stop=True)
    t = result.timings
    return t.tokens_in, t.tokens_in / t.prefill_s, (t.tokens_out - 1) / t.decode_s


def llama_round(llm: Any, ids: list[int]) -> tuple[float, float]:
    """From an empty state: prefill `ids`, then NEW_TOKENS greedy tokens; (prefill, decode) tokens/s. Only the
    last position's logits are computed, as the engine does (all of them would cost the output head per token)."""
    import llama_cpp
    import numpy as np

    def next_token() -> int:
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
        return int(np.argmax(logits))

    llm.reset()
    started = time.perf_counter()
    llm.eval(ids)
    token = next_token()
    prefilled = time.perf_counter()
    for _ in range(NEW_TOKENS - 1):
        llm.eval([token])
        token = next_token()
    ended = time.perf_counter()
    return len(ids) / (prefilled - started), (NEW_TOKENS - 1) / (ended - prefilled)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.llama_cpp_cpu", description=__doc__.split("\n")[0])
    parser.add_argument("--llama-cpp-source", type=Path, required=True, help="a llama.cpp source tree")
    parser.add_argument("--quick", action="store_true", help="the tiny reference checkpoint: a smoke run")
    args = parser.parse_args(argv)
    try:
        import llama_cpp
    except ImportError:
        print("llama-cpp-python is not installed: pip install llama-cpp-python (it compiles llama.cpp)")
        return 2
    if not (args.llama_cpp_source / "convert_hf_to_gguf.py").is_file():
        print(f"{args.llama_cpp_source} has no convert_hf_to_gguf.py: give a llama.cpp source tree")
        return 2
    # heavy: safetensors, torch
    from bench.qwen35_tiny import build_qwen35_tiny
    from holodesk.inference.engine.qwen35 import Qwen35Engine

    began = time.monotonic()
    variant = QUICK_VARIANT if args.quick else VARIANT
    request = text_only(navigation_request(1))
    result = BenchResult("llama_cpp_cpu")
    with tempfile.TemporaryDirectory(prefix="holodesk-llama-") as folder:
        work = Path(folder)
        checkpoint = build_qwen35_tiny(work / variant, dtype="bfloat16", variant=variant)
        gguf = convert(checkpoint, args.llama_cpp_source, work)
        engine = Qwen35Engine(checkpoint, device="cpu", reuse=True)
        ids = engine.tokenize(request).ids
        threads = len(os.sched_getaffinity(0))
        llm = llama_cpp.Llama(
            str(gguf), n_ctx=len(ids) + NEW_TOKENS + 16, n_batch=512, n_threads=threads, logits_all=False, verbose=False
        )
        engine_round(engine, request)  # warm-up, not measured
        llama_round(llm, ids[:64])
        pairs: list[tuple[float, float, float, float]] = []
        for index in range(ROUNDS):
            if index % 2:
                llama = llama_round(llm, ids)
                _, *engine_figures = engine_round(engine, request)
            else:
                _, *engine_figures = engine_round(engine, request)
                llama = llama_round(llm, ids)
            pairs.append((engine_figures[0], llama[0], engine_figures[1], llama[1]))
    result.add("engine prefill", stats_of([p[0] for p in pairs], "tok/s"))
    result.add("llama.cpp prefill", stats_of([p[1] for p in pairs], "tok/s"), baseline="engine prefill")
    result.add("engine decode", stats_of([p[2] for p in pairs], "tok/s"))
    result.add("llama.cpp decode", stats_of([p[3] for p in pairs], "tok/s"), baseline="engine decode")
    result.notes.append(
        f"{variant}, bfloat16, {len(ids)} prompt tokens (text only), {NEW_TOKENS} new tokens, {ROUNDS} rounds,"
        f" {threads} threads, llama-cpp-python {llama_cpp.__version__}"
    )
    print(format_table(result.figures))
    write_results(RESULTS, [result], machine_description(), time.monotonic() - began)
    prefill = statistics.median(p[1] / p[0] for p in pairs)
    decode = statistics.median(p[3] / p[2] for p in pairs)
    print(f"prefill llama.cpp/engine {prefill:.2f}, decode llama.cpp/engine {decode:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
