"""`python -m bench.qwen35_tiny OUT`: write a tiny random-weight checkpoint in Qwen3.5 VL's layout into OUT.

The layout of Holo3.1 / Holo4 (see the package's docstring), a few megabytes, built in about a second,
for serving on a laptop's CPU (docs/remote-server.md, "Trying it without a GPU"). Prints the folder.

    python -m bench.qwen35_tiny /tmp/holo4-tiny                     # dense, random answers
    python -m bench.qwen35_tiny /tmp/holo4-tiny --variant scripted  # reasons, then clicks (120, 340)
    python -m bench.qwen35_tiny /tmp/holo4-tiny --variant moe       # the 35B-A3B sizes' experts
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.qwen35_tiny import VARIANTS, build_qwen35_tiny


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.qwen35_tiny",
        description="Write a tiny random-weight checkpoint in Qwen3.5 VL's layout (Holo3.1, Holo4) into OUT. "
        "Never a real model: its answers mean nothing (the scripted variant always clicks the same point).",
    )
    parser.add_argument("out", type=Path, help="the folder to write (replaced if it exists)")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="reference")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(argv)
    out: Path = ns.out
    if out.exists() and not out.is_dir():
        parser.error(f"{out} is a file, not a folder: give a folder to write the checkpoint into")
    if out.is_dir() and any(out.iterdir()) and not (out / "config.json").is_file():
        # The builder replaces OUT; a folder of something else is never removed.
        parser.error(f"{out} holds files that are not a checkpoint: give an empty or new folder")
    print(build_qwen35_tiny(out, dtype=ns.dtype, seed=ns.seed, variant=ns.variant))
    return 0


if __name__ == "__main__":
    sys.exit(main())
