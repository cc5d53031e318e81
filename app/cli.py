"""The `holodesk` command line: argument parsing and dispatch to the subcommands.

Qt is imported only by the subcommands that show windows, so `holodesk doctor` and friends start
fast and work without a display server where they can.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

# Exit codes a script can rely on.
EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and reports a failure (a blocking doctor check, a failed run)
EXIT_USAGE = 2  # bad arguments (argparse's own convention)


def _add_backend_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=("local", "remote"), default="local", help="where the model runs")
    parser.add_argument("--model", help="checkpoint directory or Hugging Face repo id (local backend)")
    parser.add_argument("--base-url", help="OpenAI-compatible server URL, e.g. http://gpu-box:8000/v1 (remote)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="local backend device")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="holodesk", description="A desktop assistant that acts only when you approve."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    doctor = commands.add_parser("doctor", help="check display, capture, input, GPU, kernels and weights")
    _add_backend_options(doctor)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "doctor":
        from app.doctor import DoctorOptions, run_doctor

        return run_doctor(
            DoctorOptions(backend=args.backend, model=args.model, base_url=args.base_url, device=args.device)
        )
    parser.print_help()
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
