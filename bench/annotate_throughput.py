"""`python -m bench.annotate_throughput`: items per second of `holodesk annotate` by concurrency.

A loopback OpenAI-compatible server (bench.slow_server, in its own process so its threads do not
count as client CPU) answers every localization after a fixed latency, like a busy vLLM would. The
batch runs through the real BatchAnnotator and RemoteBackend at concurrency 1 (sequential), 2, 4
... 64, each run repeated; the table gives the median items per second, the
speed-up over sequential, the client's CPU seconds per item and its resident memory.

    python -m bench.annotate_throughput --latency 0.2 --items 128 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from bench.harness import machine_description
from bench.slow_server import MODEL

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "annotate_results.json"
CONCURRENCY = (1, 2, 4, 8, 16, 32, 64)


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_batch(base_url: str, concurrency: int, items: int, folder: Path) -> dict[str, float]:
    from holodesk.app.eval.annotate import AnnotateItem, BatchAnnotator
    from holodesk.inference.model_policy import ModelPolicy
    from holodesk.inference.profiles import get_profile
    from holodesk.inference.remote import RemoteBackend

    profile = get_profile("holotron")
    backends = [RemoteBackend(base_url, model=MODEL, api_key="", encoded_images_kept=0) for _ in range(concurrency)]
    policies = [ModelPolicy(profile, backend) for backend in backends]
    batch = [AnnotateItem(f"item-{i}", folder / "shot.png", f"the button number {i}") for i in range(items)]
    output = folder / f"out-{concurrency}-{time.monotonic_ns()}.jsonl"
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    localized, failed = BatchAnnotator(policies).run(batch, output)
    wall = time.perf_counter() - wall_before
    cpu = time.process_time() - cpu_before
    if failed or localized != items:
        raise RuntimeError(f"{failed} of {items} items failed at concurrency {concurrency}")
    return {"seconds": wall, "items_per_s": items / wall, "cpu_s_per_item": cpu / items, "rss_mib": rss_mib()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.annotate_throughput", description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the server takes per request (0.2)")
    parser.add_argument("--items", type=int, default=128, help="items per run (default 128)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per concurrency; the median is shown")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    if args.latency < 0 or args.items < 1 or args.repeats < 1:
        parser.error("--latency must be >= 0, --items and --repeats >= 1")

    repo = Path(__file__).resolve().parent.parent
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.slow_server", str(args.latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    rows: list[dict[str, Any]] = []
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            Image.new("RGB", (1280, 800), (120, 130, 140)).save(folder / "shot.png")
            run_batch(base_url, 4, 8, folder)  # warm-up: imports, first connections
            # Interleaved: each repeat goes through every concurrency, so drift hits them alike.
            runs: dict[int, list[dict[str, float]]] = {c: [] for c in CONCURRENCY}
            for _ in range(args.repeats):
                for concurrency in CONCURRENCY:
                    runs[concurrency].append(run_batch(base_url, concurrency, args.items, folder))
        sequential = statistics.median(r["items_per_s"] for r in runs[1])
        for concurrency in CONCURRENCY:
            measured = runs[concurrency]
            rate = statistics.median(r["items_per_s"] for r in measured)
            rows.append(
                {
                    "concurrency": concurrency,
                    "items_per_s": rate,
                    "items_per_s_min": min(r["items_per_s"] for r in measured),
                    "items_per_s_max": max(r["items_per_s"] for r in measured),
                    "speedup_vs_sequential": rate / sequential,
                    "ideal_items_per_s": concurrency / args.latency if args.latency else None,
                    "cpu_ms_per_item": 1000 * statistics.median(r["cpu_s_per_item"] for r in measured),
                    "rss_mib": max(r["rss_mib"] for r in measured),
                }
            )
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=10)

    print(f"annotate throughput: {args.items} items a run, server latency {args.latency:g} s, "
          f"median of {args.repeats} runs")  # fmt: skip
    header = f"{'in flight':>9} {'items/s':>9} {'(min-max)':>15} {'vs seq':>7} {'ideal':>7}"
    print(f"{header} {'CPU ms/item':>11} {'RSS MiB':>8}")
    for row in rows:
        ideal = f"{row['ideal_items_per_s']:7.1f}" if row["ideal_items_per_s"] else "      -"
        spread = f"{row['items_per_s_min']:.1f}-{row['items_per_s_max']:.1f}"
        print(
            f"{row['concurrency']:>9} {row['items_per_s']:>9.1f} {spread:>15} {row['speedup_vs_sequential']:>6.1f}x"
            f" {ideal} {row['cpu_ms_per_item']:>11.2f} {row['rss_mib']:>8.0f}"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    document = {
        "machine": machine_description(),
        "latency_s": args.latency,
        "items": args.items,
        "repeats": args.repeats,
        "peak_rss_mib": peak,
        "rows": rows,
    }
    args.output.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"results: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
