"""The `holodesk` command line: argument parsing and dispatch to the subcommands.

Qt is imported only by the subcommands that show windows, so `holodesk doctor`, `run`, `locate`
and `history` start fast and work from a plain terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_USAGE = 2  # bad arguments (argparse's own convention)

EPILOG = """exit codes: 0 done, 1 failed, 2 bad arguments or configuration, 3 stopped by the user,
4 the model asks a question, 5 step limit reached (doctor: 0 ready, 1 something blocks the backend)"""


def _add_backend_options(parser: argparse.ArgumentParser, *, scripted: bool = True) -> None:
    backends = ("local", "remote", "scripted") if scripted else ("local", "remote")
    parser.add_argument("--backend", choices=backends, default="local", help="where the model runs (default: local)")
    parser.add_argument(
        "--model", help="local: checkpoint directory or Hugging Face repo id; remote: the served model's name"
    )
    parser.add_argument("--base-url", help="OpenAI-compatible server URL, e.g. http://gpu-box:8000/v1 (remote)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="local backend device")
    if scripted:
        parser.add_argument("--script", type=Path, help="scripted backend: JSONL file of model answers")
        parser.add_argument("--profile", default="holotron", help="model profile (holotron, holo1.5, holo1)")


def _monitor(value: str) -> int | None:
    if value == "all":
        return None
    try:
        index = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--monitor takes a number from 1 or 'all', got {value!r}") from None
    if index < 1:
        raise argparse.ArgumentTypeError(f"monitors are numbered from 1, got {index}")
    return index


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="holodesk",
        description="A desktop assistant that acts only when you approve.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", description="without a command, holodesk starts the tray application"
    )

    doctor = commands.add_parser("doctor", help="check display, capture, input, GPU, kernels and weights")
    _add_backend_options(doctor, scripted=False)
    doctor.add_argument(
        "--calibrate",
        action="store_true",
        help="instead: click known points on every monitor as a run would and report where they land",
    )

    run = commands.add_parser("run", help="do a task, approving each step in this terminal", epilog=EPILOG)
    run.add_argument("task", help="what to do, in words")
    _add_backend_options(run)
    run.add_argument("--max-steps", type=_positive, default=30, help="stop after this many steps (default 30)")
    run.add_argument("--monitor", type=_monitor, default=1, help="monitor number, or 'all' (default 1)")
    run.add_argument("--sessions", type=Path, help="where trajectories go (default: the user data folder)")

    locate = commands.add_parser("locate", help='print where an element is in an image, as {"x":..,"y":..}')
    locate.add_argument("image", type=Path, help="a screenshot (PNG or JPEG)")
    locate.add_argument("element", help="the element, described in words")
    _add_backend_options(locate)

    history = commands.add_parser("history", help="list recorded sessions, or show one")
    history.add_argument("session", nargs="?", help="a session folder name (or a unique prefix)")
    history.add_argument("--json", action="store_true", help="print the session's records as JSON")
    history.add_argument("--sessions", type=Path, help="where trajectories are (default: the user data folder)")

    export = commands.add_parser("export-corrections", help="write the targets you moved as a grounding data set")
    export.add_argument("output", type=Path, help="the JSONL file to write")
    export.add_argument("--sessions", type=Path, help="where trajectories are (default: the user data folder)")

    trigger = commands.add_parser(
        "trigger", help="ask the running Holodesk to open the task prompt (bind this to a desktop shortcut)"
    )
    trigger.add_argument(
        "what", nargs="?", choices=("prompt", "show", "stop"), default="prompt", help="what to ask (default: prompt)"
    )
    return parser


def _sessions_root(value: Path | None) -> Path:
    from holodesk.automation.trajectory import default_root

    return value if value is not None else default_root()


def _policy_options(args: argparse.Namespace):  # -> PolicyOptions; imported lazily
    from holodesk.app.common.policy_factory import PolicyOptions

    return PolicyOptions(
        backend=args.backend,
        profile=args.profile,
        model=args.model,
        base_url=args.base_url,
        device=args.device,
        script=args.script,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "doctor" and args.calibrate:
        from holodesk.app.gui.calibration import run_calibration  # shows windows: Qt

        return run_calibration()
    if args.command == "doctor":
        from holodesk.app.cli.doctor import DoctorOptions, run_doctor

        return run_doctor(
            DoctorOptions(backend=args.backend, model=args.model, base_url=args.base_url, device=args.device)
        )
    if args.command == "run":
        from holodesk.app.cli.run_command import run_task

        return run_task(
            args.task,
            _policy_options(args),
            max_steps=args.max_steps,
            monitor=args.monitor,
            sessions=_sessions_root(args.sessions),
        )
    if args.command == "locate":
        from holodesk.app.cli.run_command import locate

        return locate(args.image, args.element, _policy_options(args), sys.stdout, sys.stderr)
    if args.command == "history":
        from holodesk.app.cli.history_command import list_sessions, show_session

        root = _sessions_root(args.sessions)
        if args.session:
            return show_session(root, args.session, sys.stdout, as_json=args.json)
        return list_sessions(root, sys.stdout)
    if args.command == "export-corrections":
        from holodesk.app.cli.history_command import export

        return export(_sessions_root(args.sessions), args.output, sys.stdout)
    if args.command == "trigger":
        from holodesk.app.common.instance_client import run_trigger

        return run_trigger(args.what, sys.stderr)
    # No command: the tray application (or wake the one already running).
    from holodesk.app.gui.main import run_app

    return run_app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
