"""`python -m bench.eval_miniwob`: time per MiniWoB++ step of `holodesk eval` with the DOM oracle.

Starts a private Xvfb, one Chromium window and the oracle policy (bench/rigs/miniwob_oracle.py,
which answers at once), so the figure is the harness's own cost per step: capture, prompt and
parse, mapping, auto-approval, the XTEST action, waiting for the screen to settle, the trajectory
record and the page's bookkeeping. A model's own time adds to it.

    python -m bench.eval_miniwob --episodes 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.harness import machine_description
from bench.rigs.miniwob_oracle import ORACLE_TASKS, MiniWoBOracle
from holodesk.app.eval.miniwob_browser import MiniWoBBrowser
from holodesk.app.eval.miniwob_eval import MiniWoBEvaluation, MiniWoBOptions
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.virtual_display import DisplayLayout, xvfb_display
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "eval_results.json"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eval_miniwob", description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=5, help="episodes per task (default 5)")
    parser.add_argument("--zoom", type=float, default=3.0)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be at least 1")

    with xvfb_display(DisplayLayout(1280, 800)), tempfile.TemporaryDirectory() as sessions:
        capture = ScreenCapture()
        with MiniWoBBrowser(zoom=args.zoom) as browser:
            oracle = MiniWoBOracle(browser, capture.monitors()[0].rect)
            evaluation = MiniWoBEvaluation(
                browser,
                ModelPolicy(get_profile("holotron"), oracle),
                InputPerformer(X11Input(capture=capture)),
                capture,
                MiniWoBOptions(tasks=ORACLE_TASKS, episodes=args.episodes, zoom=args.zoom),
                trajectory_root=Path(sessions),
            )
            report = evaluation.run()
    per_step = [e.seconds_per_step for e in report.episodes if e.seconds_per_step is not None]
    print(f"MiniWoB++ with the oracle: {len(report.episodes)} episodes, 1280x800 display, zoom {args.zoom:g}")
    print(report.table())
    print(f"time per step: median {statistics.median(per_step):.3f} s, "
          f"min {min(per_step):.3f} s, max {max(per_step):.3f} s")  # fmt: skip
    document = {
        "machine": machine_description(),
        "median_seconds_per_step": statistics.median(per_step),
        **report.to_json(),
    }
    args.output.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"results: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
