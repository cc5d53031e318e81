"""The `holodesk` command line: argument parsing and dispatch to the subcommands.

Qt is imported only by the subcommands that show windows, so `holodesk doctor`, `run`, `locate`
and `history` start fast and work from a plain terminal.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

from holodesk.app.cli.arguments import positive_whole_number
from holodesk.app.common.choices import BACKENDS, DEVICES, PROFILE_NAMES

if TYPE_CHECKING:
    from holodesk.app.cli.stop_signals import StopSignals
    from holodesk.app.common.overrides import CommandFlags
    from holodesk.app.common.policy_factory import PolicyOptions
    from holodesk.app.common.settings import Settings

EPILOG = """exit codes: 0 done, 1 failed, 2 bad arguments or configuration, 3 stopped by the user,
4 the model asks a question, 5 step limit reached (doctor: 0 ready, 1 something blocks the backend)"""


SETTINGS_NOTE = "options left out come from the settings file (the tray app's Settings window writes it)"


def _add_backend_options(parser: argparse.ArgumentParser, *, scripted: bool = True) -> None:
    # No defaults here: a flag left out means "as in the settings file" (holodesk.app.common.overrides).
    backends = BACKENDS if scripted else tuple(b for b in BACKENDS if b != "scripted")
    parser.add_argument("--backend", choices=backends, help="where the model runs (default: the settings file's)")
    parser.add_argument(
        "--model", help="local: checkpoint directory or Hugging Face repo id; remote: the served model's name"
    )
    parser.add_argument("--base-url", help="OpenAI-compatible server URL, e.g. http://gpu-box:8000/v1 (remote)")
    parser.add_argument("--device", choices=DEVICES, help="local backend device")
    parser.add_argument("--profile", help=f"model profile ({', '.join(PROFILE_NAMES)})")
    if scripted:
        parser.add_argument("--script", type=Path, help="scripted backend: JSONL file of model answers")


def _monitor(value: str) -> int | Literal["all"]:
    if value == "all":
        return "all"
    try:
        index = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--monitor takes a number from 1 or 'all', got {value!r}") from None
    if index < 1:
        raise argparse.ArgumentTypeError(f"monitors are numbered from 1, got {index}")
    return index


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="holodesk",
        description="A desktop assistant that acts only when you approve.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"holodesk {_version()}")
    app_options = parser.add_argument_group(
        "the tray application (no command)", "these replace the settings file's values for this start of the app"
    )
    app_options.add_argument("--backend", dest="app_backend", choices=("local", "remote"), help="where the model runs")
    app_options.add_argument(
        "--model", dest="app_model", metavar="MODEL", help="local: checkpoint or repo id; remote: served name"
    )
    app_options.add_argument(
        "--base-url", dest="app_base_url", metavar="URL", help="OpenAI-compatible server URL (remote)"
    )
    app_options.add_argument("--device", dest="app_device", choices=DEVICES, help="local backend device")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", description="without a command, holodesk starts the tray application"
    )

    doctor = commands.add_parser(
        "doctor", help="check display, capture, input, GPU, kernels and weights", epilog=SETTINGS_NOTE
    )
    _add_backend_options(doctor, scripted=False)
    doctor.add_argument(
        "--try",
        dest="try_step",
        action="store_true",
        help="also run one step on a canned screenshot: loads the model, or asks the server (never acts)",
    )
    doctor.add_argument(
        "--calibrate",
        action="store_true",
        help="instead: click known points on every monitor as a run would and report where they land",
    )

    run = commands.add_parser(
        "run", help="do a task, approving each step in this terminal", epilog=f"{SETTINGS_NOTE}\n{EPILOG}"
    )
    run.add_argument("task", help="what to do, in words")
    _add_backend_options(run)
    run.add_argument("--max-steps", type=positive_whole_number, help="stop after this many steps")
    run.add_argument("--monitor", type=_monitor, help="monitor number, or 'all'")
    run.add_argument("--sessions", type=Path, help="where trajectories go")

    locate = commands.add_parser(
        "locate", help='print where an element is in an image, as {"x":..,"y":..}', epilog=SETTINGS_NOTE
    )
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

    routine = commands.add_parser("routine", help="save a finished session as a routine, list routines, run one")
    routine_commands = routine.add_subparsers(dest="routine_command", metavar="ACTION", required=True)
    routine_save = routine_commands.add_parser("save", help="compile a finished session into a routine")
    routine_save.add_argument("session", help="a session folder name (or a unique prefix; holodesk history lists them)")
    routine_save.add_argument("name", help="the routine's name")
    routine_save.add_argument("--sessions", type=Path, help="where trajectories are (default: the settings file's)")
    routine_list = routine_commands.add_parser("list", help="list the saved routines")
    routine_run = routine_commands.add_parser("run", help="replay a routine, approving in this terminal")
    routine_run.add_argument("name", help="the routine's name")
    routine_run.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE", help="a parameter's value")
    routine_run.add_argument("--no-model", action="store_true", help="never ask the model to locate a target")
    routine_run.add_argument("--sessions", type=Path, help="where the replay is recorded (default: the settings')")
    _add_backend_options(routine_run)
    for sub in (routine_save, routine_list, routine_run):
        sub.add_argument("--routines", type=Path, help="where routines are (default: the user data folder)")

    # start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.eval.cli import add_commands as add_eval_commands

    add_eval_commands(commands, _add_backend_options)

    mcp = commands.add_parser(
        "mcp", help="serve other agents over MCP: every action they ask for waits for your approval here"
    )
    mcp.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 with a bearer token it prints")
    mcp.add_argument("--port", type=int, default=0, help="--http: the port (default: any free one, printed)")
    mcp.add_argument("--print-config", metavar="HOST", help="print HOST's configuration snippet and exit")
    mcp.add_argument("--sessions", type=Path, help="where its steps are recorded (default: the settings file's)")
    mcp.add_argument("--routines", type=Path, help="where routines are (default: the user data folder)")

    setup = commands.add_parser(
        "setup", help="choose a model that fits this computer, download it with progress, and use it"
    )
    setup.add_argument(
        "--model",
        help="holo3.1-0.8b, holo3.1-4b, holotron-12b (on a GPU of 32 GiB), or a Hugging Face repository id"
        " (owner/name)",
    )
    setup.add_argument("--profile", help=f"the model's profile ({', '.join(PROFILE_NAMES)}); known models: theirs")
    setup.add_argument("--revision", help="a branch, tag or commit of the repository (default: main)")
    setup.add_argument("--device", choices=("cpu", "cuda"), help="where it runs (default: a GPU it fits, else the CPU)")
    setup.add_argument("--yes", action="store_true", help="ask nothing: the first choice that fits (or --model)")
    elsewhere = setup.add_mutually_exclusive_group()
    elsewhere.add_argument(
        "--server",
        metavar="URL",
        help="use a model server elsewhere (vLLM or another OpenAI-compatible server, such as gpu-box:8000):"
        " it is asked which model it serves, and set only once it answered",
    )
    elsewhere.add_argument("--window", action="store_true", help="choose and download in a window instead")

    trigger = commands.add_parser(
        "trigger", help="ask the running Holodesk to open the task prompt (bind this to a desktop shortcut)"
    )
    trigger.add_argument(
        "what", nargs="?", choices=("prompt", "show", "stop"), default="prompt", help="what to ask (default: prompt)"
    )
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("holodesk")
    except PackageNotFoundError:  # run from a source tree without an install
        return "(not installed)"


def _app_flags(args: argparse.Namespace) -> CommandFlags | None:
    """The tray app's flags, None when none was given."""
    # start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.common.overrides import CommandFlags

    flags = CommandFlags(
        backend=args.app_backend, model=args.app_model, base_url=args.app_base_url, device=args.app_device
    )
    return None if flags == CommandFlags() else flags


def _sessions_root(value: Path | None) -> Path:
    """--sessions, else the settings file's session folder (its default when that value is bad)."""
    # start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.common.settings import load_settings

    return value if value is not None else load_settings().settings.sessions.folder


def command_settings(args: argparse.Namespace, err: TextIO) -> Settings | None:
    """The settings file with this command's flags on top; None (after saying why) when they don't fit."""
    # start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.common.overrides import CommandFlags, FlagError, apply_flags
    from holodesk.app.common.settings import load_settings

    loaded = load_settings()
    if loaded.problem is not None:
        err.write(f"holodesk: problems in the settings file {loaded.problem.path}:\n")
        for line in loaded.problem.problems:
            err.write(f"holodesk:   {line}\n")
        err.write("holodesk: each of these uses its default; every other value of the file is used.\n")
    flags = CommandFlags(
        backend=args.backend,
        profile=getattr(args, "profile", None),
        model=args.model,
        base_url=args.base_url,
        device=args.device,
        script=getattr(args, "script", None),
        max_steps=getattr(args, "max_steps", None),
        monitor=getattr(args, "monitor", None),
        sessions=getattr(args, "sessions", None),
    )
    try:
        return apply_flags(loaded.settings, flags)
    except FlagError as exc:
        err.write(f"holodesk: {exc}\n")
        return None


def _eval_policy_options(args: argparse.Namespace) -> PolicyOptions | int:
    """`holodesk eval`'s model: the settings file plus the flags, or the exit code after saying why not."""
    # heavy: OpenCV
    from holodesk.app.cli.run_command import EXIT_CONFIG

    settings = command_settings(args, sys.stderr)
    return EXIT_CONFIG if settings is None else settings.to_policy_options()


def _model_command(args: argparse.Namespace, signals: StopSignals | None = None) -> int:
    """doctor, run and locate: the settings file plus the flags, then the command."""
    # heavy: OpenCV
    from holodesk.app.cli.run_command import EXIT_CONFIG

    settings = command_settings(args, sys.stderr)
    if settings is None:
        return EXIT_CONFIG
    options = settings.to_policy_options()
    if args.command == "doctor" and args.calibrate:
        from holodesk.app.gui.calibration import run_calibration  # shows windows: Qt

        return run_calibration()
    if args.command == "doctor":
        # start-up: `holodesk --help` must stay light (bench/startup.py)
        from holodesk.app.cli.doctor import DoctorOptions, run_doctor

        return run_doctor(
            DoctorOptions(
                options.backend,
                options.model,
                options.base_url,
                options.device,
                try_step=args.try_step,
                profile=options.profile,
                max_steps=settings.run.max_steps,
            )
        )
    if args.command == "run":
        # heavy: OpenCV
        from holodesk.app.cli.run_command import run_task

        return run_task(
            args.task,
            options,
            max_steps=settings.run.max_steps,
            monitor=settings.run.capture_monitor,
            sessions=settings.sessions.folder,
            signals=signals,
        )
    # heavy: OpenCV
    from holodesk.app.cli.run_command import locate

    return locate(args.image, args.element, options, sys.stdout, sys.stderr)


def _routine_command(args: argparse.Namespace, signals: StopSignals | None = None) -> int:
    # heavy: OpenCV; start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.cli import routine_command
    from holodesk.automation.routines.routine_file import default_routines_root

    routines = args.routines or default_routines_root()
    if args.routine_command == "list":
        return routine_command.list_routines(routines, sys.stdout)
    if args.routine_command == "save":
        return routine_command.save(
            _sessions_root(args.sessions), args.session, args.name, routines, sys.stdin, sys.stdout, sys.stderr
        )
    settings = command_settings(args, sys.stderr)
    if settings is None:
        return routine_command.EXIT_CONFIG
    return routine_command.run_with_settings(args.name, args.set, routines, not args.no_model, settings, signals)


# OpenMP's threads (torch's CPU kernels) spin-wait between parallel regions by default. On a desktop
# whose cores are busy with the user's programs, every spin takes a core from them, and the model's
# thousands of small CPU kernels per token ran many times slower than with passive waiting (figures:
# bench/cpu_wait_policy.py). OpenMP reads it when torch loads, so it is set before anything is imported.
CPU_WAIT_POLICY = "PASSIVE"


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("OMP_WAIT_POLICY", CPU_WAIT_POLICY)
    signals = None
    if _starts_a_run(sys.argv[1:] if argv is None else argv):
        # start-up: `holodesk --help` must stay light (bench/startup.py)
        from holodesk.app.cli.stop_signals import StopSignals

        # Taken first, and kept until the process exits: a stop is a stop from the command's first
        # moment (the session says the run stopped before its first step) to its last (a signal after
        # the session closed changes nothing, whichever of the three it is).
        signals = StopSignals().install()
    try:
        return _main(argv, signals)
    except BrokenPipeError:
        # The reader went away (`holodesk history | head -2`): not an error. Python would print a
        # traceback while flushing stdout at exit; point it at /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0


def _starts_a_run(argv: Sequence[str]) -> bool:
    """Whether the command line is `holodesk run ...` or `holodesk routine run ...`."""
    words = [word for word in argv if not word.startswith("-")]
    return words[:1] == ["run"] or words[:2] == ["routine", "run"]


def _main(argv: Sequence[str] | None, signals: StopSignals | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    app_flags = _app_flags(args)
    if app_flags is not None and args.command is not None:
        parser.error(f"put --backend, --model, --base-url and --device after the command: holodesk {args.command} ...")
    if args.command in ("doctor", "run", "locate"):
        return _model_command(args, signals)
    if args.command == "history":
        # start-up: `holodesk --help` must stay light (bench/startup.py)
        from holodesk.app.cli.history_command import list_sessions, show_session

        root = _sessions_root(args.sessions)
        if args.session:
            return show_session(root, args.session, sys.stdout, sys.stderr, as_json=args.json)
        return list_sessions(root, sys.stdout)
    if args.command == "routine":
        return _routine_command(args, signals)
    if args.command == "export-corrections":
        # start-up: `holodesk --help` must stay light (bench/startup.py)
        from holodesk.app.cli.history_command import export

        return export(_sessions_root(args.sessions), args.output, sys.stdout, sys.stderr)
    if args.command in ("eval", "annotate"):
        # start-up: `holodesk --help` must stay light (bench/startup.py)
        from holodesk.app.eval.cli import run as run_eval

        return run_eval(args, _eval_policy_options)
    if args.command == "mcp":
        # heavy: OpenCV
        from holodesk.app.mcp import command as mcp_command

        if args.print_config:
            return mcp_command.print_config(args.print_config, sys.stdout, sys.stderr)
        return mcp_command.serve(http=args.http, port=args.port, sessions=args.sessions, routines=args.routines)
    if args.command == "setup":
        if args.window:
            from holodesk.app.gui.first_run import run_first_run_window  # a window: Qt

            return run_first_run_window()
        # start-up: `holodesk --help` must stay light (bench/startup.py)
        from holodesk.app.setup.command import main_for_cli

        return main_for_cli(args.model, args.profile, args.revision, args.device, args.yes, args.server)
    if args.command == "trigger":
        # start-up: `holodesk --help` must stay light (bench/startup.py)
        from holodesk.app.common.instance_client import run_trigger

        return run_trigger(args.what, sys.stderr)
    # No command: the tray application (or wake the one already running).
    from holodesk.app.gui.main import run_app

    return run_app(flags=app_flags)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
