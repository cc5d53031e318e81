"""`python -m bench.annotate_throughput`: items per second of `holodesk annotate` by concurrency.

`--server fake` (the default): a loopback OpenAI-compatible server (bench.slow_server,
in its own process so its threads do not count as client CPU) answers every localization after a
fixed latency, like a busy vLLM would. `--server vllm`: a real vLLM (the CPU build the vLLM tier
installs, .venv-vllm) serving the tiny random-weight Holotron-architecture checkpoint; its answers
are real constrained decodes. The batch runs through the real BatchAnnotator and RemoteBackend at
each concurrency, each run repeated; the table gives the median items per second, the speed-up over
sequential, the client's CPU milliseconds per item and its resident memory. The screenshot is
1920x1080, so the client's image encoding shows at its real cost.

    python -m bench.annotate_throughput --latency 0.2 --items 128 --repeats 3
    python -m bench.annotate_throughput --server vllm --concurrency 1,4,16 --items 32 --repeats 2
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from PIL import Image

from bench.harness import machine_description
from bench.slow_server import MODEL
from holodesk.app.eval.annotate import AnnotateItem, BatchAnnotator
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.remote import RemoteBackend

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "annotate_results.json"
CONCURRENCY = (1, 2, 4, 8, 16, 32, 64)
SCREEN = (1920, 1080)


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def screenshot(path: Path) -> Path:
    """A desktop-like 1920x1080 frame: flat colours, buttons with labels (what screenshots compress like)."""
    from PIL import ImageDraw

    image = Image.new("RGB", SCREEN, (235, 235, 240))
    draw = ImageDraw.Draw(image)
    for i in range(60):
        x, y = 20 + i * 30 % 1800, 40 + i * 17 % 1000
        draw.rectangle((x, y, x + 180, y + 40), fill=(30 + i * 3 % 200, 120, 220), outline=(0, 0, 0))
        draw.text((x + 10, y + 10), f"Button {i} label text", fill=(0, 0, 0))
    image.save(path)
    return path


def run_batch(base_url: str, concurrency: int, items: int, folder: Path, model: str | None = None) -> dict[str, float]:
    profile = get_profile("holotron")
    backends = [
        RemoteBackend(base_url, model=model or MODEL, api_key="", encoded_images_kept=0) for _ in range(concurrency)
    ]
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
    parser.add_argument("--server", choices=("fake", "vllm"), default="fake", help="which server answers (fake)")
    parser.add_argument("--latency", type=float, default=0.2, help="fake: seconds per request (0.2)")
    parser.add_argument("--items", type=int, default=128, help="items per run (default 128)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per concurrency; the median is shown")
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)), help="comma-separated levels")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    try:
        levels = tuple(int(c) for c in args.concurrency.split(","))
    except ValueError:
        parser.error(f"--concurrency must be whole numbers separated by commas, got {args.concurrency!r}")
    if args.latency < 0 or args.items < 1 or args.repeats < 1 or min(levels) < 1:
        parser.error("--latency must be >= 0, --items, --repeats and every concurrency >= 1")

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch, _server(args.server, args.latency, Path(scratch)) as (url, model):
        folder = Path(scratch)
        screenshot(folder / "shot.png")
        run_batch(url, 4, 8, folder, model)  # warm-up: imports, first connections
        # Interleaved: each repeat goes through every concurrency, so drift hits them alike.
        runs: dict[int, list[dict[str, float]]] = {c: [] for c in levels}
        for _ in range(args.repeats):
            for concurrency in levels:
                runs[concurrency].append(run_batch(url, concurrency, args.items, folder, model))
    sequential = statistics.median(r["items_per_s"] for r in runs[levels[0]])
    for concurrency in levels:
        measured = runs[concurrency]
        rate = statistics.median(r["items_per_s"] for r in measured)
        rows.append(
            {
                "concurrency": concurrency,
                "items_per_s": rate,
                "items_per_s_min": min(r["items_per_s"] for r in measured),
                "items_per_s_max": max(r["items_per_s"] for r in measured),
                "speedup_vs_sequential": rate / sequential,
                "ideal_items_per_s": concurrency / args.latency if args.latency and args.server == "fake" else None,
                "cpu_ms_per_item": 1000 * statistics.median(r["cpu_s_per_item"] for r in measured),
                "rss_mib": max(r["rss_mib"] for r in measured),
            }
        )

    against = f"fake server, latency {args.latency:g} s" if args.server == "fake" else "vLLM (CPU), tiny model"
    print(f"annotate throughput, {against}: {args.items} items of {SCREEN[0]}x{SCREEN[1]} a run, "
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
        "server": args.server,
        "latency_s": args.latency if args.server == "fake" else None,
        "items": args.items,
        "repeats": args.repeats,
        "peak_rss_mib": peak,
        "rows": rows,
    }
    args.output.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"results: {args.output}")
    return 0


@contextmanager
def _server(kind: str, latency: float, scratch: Path) -> Iterator[tuple[str, str | None]]:
    """The server's API root and model name, for the run; stopped after it."""
    repo = Path(__file__).resolve().parent.parent
    if kind == "vllm":
        # The vLLM tier's own launcher (bench.rigs.vllm_server), on the environment tests/run.sh builds.
        from bench.nemotron_tiny import build_nemotron_tiny
        from bench.rigs.vllm_server import serve

        with serve(build_nemotron_tiny(scratch / "ckpt"), scratch / "vllm") as running:
            yield running.base_url, running.model
        return
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.slow_server", str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip(), None
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
