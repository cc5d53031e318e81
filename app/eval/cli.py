"""The `holodesk eval ...` and `holodesk annotate` subcommands: their arguments and what each runs.

main.py registers them with `add_commands` and hands the parsed arguments to `run`; the heavy
imports (selenium, the backends) happen only when a command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from holodesk.app.cli.arguments import positive_whole_number as whole
from holodesk.app.common.choices import DEFAULT_PROFILE

if TYPE_CHECKING:
    from holodesk.app.common.policy_factory import PolicyOptions
    from holodesk.app.eval.grounding import GroundingItem
    from holodesk.app.eval.miniwob_eval import MiniWoBOptions, MiniWoBReport

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_STOPPED = 3  # as `holodesk run` stopped by the user
DEFAULT_MINIWOB_TASKS = (
    "click-button,click-link,focus-text,enter-text,enter-password,login-user,click-checkboxes,"
    "click-option,click-tab,click-dialog,click-collapsible,choose-list,scroll-text-2"
)

BackendOptionAdder = Callable[[argparse.ArgumentParser], None]
# The settings file plus the command's flags: the options, or the exit code after saying why not.
PolicyOptionsFor = Callable[[argparse.Namespace], "PolicyOptions | int"]


def _zoom(value: str) -> float:
    try:
        zoom = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not 0.5 <= zoom <= 8:
        raise argparse.ArgumentTypeError(f"the zoom must be between 0.5 and 8, got {value}")
    return zoom


def add_commands(commands: Any, add_backend_options: BackendOptionAdder) -> None:
    """Add `eval` (with miniwob, grounding, make-grounding) and `annotate` to the subcommand parser."""
    evaluate = commands.add_parser("eval", help="measure a model with Holodesk's own loop (MiniWoB++, grounding)")
    kinds = evaluate.add_subparsers(dest="eval_command", metavar="KIND", required=True)

    miniwob = kinds.add_parser("miniwob", help="run MiniWoB++ tasks in a real Chromium window on this display")
    miniwob.add_argument("--tasks", default=DEFAULT_MINIWOB_TASKS, help="comma-separated task names")
    miniwob.add_argument("--list", action="store_true", help="list the tasks this install can run, and exit")
    miniwob.add_argument("--episodes", type=whole, default=10, help="episodes per task (default 10)")
    miniwob.add_argument("--seed", type=int, default=0, help="seed of the first episode; the next ones count up")
    miniwob.add_argument("--max-steps", type=whole, default=10, help="step limit per episode (default 10)")
    miniwob.add_argument("--zoom", type=_zoom, default=3.0, help="page scale: the 160x210 task times this (3)")
    miniwob.add_argument("--json", type=Path, help="write every episode and the per-task table here")
    miniwob.add_argument("--sessions", type=Path, help="where trajectories go (default: the user data folder)")
    miniwob.add_argument("--chromium", help="the Chromium binary (default: chromium on PATH)")
    miniwob.add_argument("--chromedriver", help="the chromedriver binary (default: chromedriver on PATH)")
    miniwob.add_argument(
        "--workers",
        type=whole,
        help="episodes at once, each on its own private Xvfb desktop with its own Chromium (default: 1, on this"
        " display; with --ray, as many as the cluster offers desktops)",
    )
    miniwob.add_argument(
        "--ray",
        metavar="auto|ADDRESS",
        help="run the workers as Ray actors on a cluster (needs holodesk[cluster]; see docs/parallel-runs.md)",
    )
    add_backend_options(miniwob)

    grounding = kinds.add_parser("grounding", help="score a grounding set (JSONL: image, instruction, bbox)")
    grounding.add_argument("file", type=Path, help="the grounding set, one JSON object a line")
    grounding.add_argument("--json", type=Path, help="write every answer and the per-category table here")
    add_backend_options(grounding)

    make = kinds.add_parser("make-grounding", help="build a grounding set from MiniWoB pages and your corrections")
    make.add_argument("output", type=Path, help="the JSONL file to write (images go to a folder beside it)")
    make.add_argument("--miniwob-tasks", help="comma-separated MiniWoB tasks to take pages from (on this display)")
    make.add_argument("--episodes", type=whole, default=5, help="pages per task (default 5)")
    make.add_argument("--seed", type=int, default=0, help="seed of the first page")
    make.add_argument("--zoom", type=_zoom, default=3.0, help="page scale (default 3)")
    make.add_argument(
        "--corrections", type=Path, action="append", default=[], help="an export of `holodesk export-corrections`"
    )

    annotate = commands.add_parser(
        "annotate", help="localize many (screenshot, instruction) items on OpenAI-compatible servers"
    )
    annotate.add_argument("input", type=Path, help="a JSONL file of {image, instruction} or a folder of image+.txt")
    annotate.add_argument("output", type=Path, help="the JSONL file results are appended to (resumable)")
    annotate.add_argument(
        "--base-url",
        action="append",
        help="a server URL; repeat it to share the load (default: the settings file's server)",
    )
    annotate.add_argument(
        "--model", help="the served model's name (default: the settings file's, else the one the server lists)"
    )
    annotate.add_argument("--profile", help=f"model profile (default: the settings file's, else {DEFAULT_PROFILE})")
    annotate.add_argument("--concurrency", type=whole, default=16, help="requests in flight (default 16)")
    annotate.add_argument(
        "--ray",
        metavar="auto|ADDRESS",
        help="run the batch on a Ray cluster with Ray Data, --concurrency actors (needs holodesk[cluster])",
    )


def run(args: argparse.Namespace, policy_options: PolicyOptionsFor) -> int:
    """Run the parsed `eval`/`annotate` command; returns the exit code."""
    if args.command == "eval" and args.eval_command == "miniwob":
        return _miniwob(args, policy_options, sys.stdout, sys.stderr)
    if args.command == "eval" and args.eval_command == "grounding":
        return _grounding(args, policy_options, sys.stdout, sys.stderr)
    if args.command == "eval" and args.eval_command == "make-grounding":
        return _make_grounding(args, sys.stdout, sys.stderr)
    if args.command == "annotate":
        return _annotate(args, sys.stdout, sys.stderr)
    raise AssertionError(f"unhandled command {args.command} {getattr(args, 'eval_command', '')}")


def _miniwob(args: argparse.Namespace, policy_options: PolicyOptionsFor, out: TextIO, err: TextIO) -> int:
    # start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.eval.miniwob_browser import BrowserError, MiniWoBBrowser, task_names
    from holodesk.app.eval.miniwob_eval import MiniWoBEvaluation, MiniWoBOptions, MiniWoBReport, parse_task_list
    from holodesk.app.eval.progress import ProgressBar

    try:
        known = task_names()
    except BrowserError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    if args.list:
        out.write("\n".join(known) + "\n")
        return EXIT_OK
    try:
        options = MiniWoBOptions(
            tasks=parse_task_list(args.tasks, known),
            episodes=args.episodes,
            seed=args.seed,
            max_steps=args.max_steps,
            zoom=args.zoom,
        )
    except ValueError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    if args.json is not None and not args.json.parent.is_dir():
        err.write(f"error: the folder of {args.json} does not exist\n")
        return EXIT_CONFIG
    if (args.workers or 1) > 1 or args.ray is not None:
        return _miniwob_parallel(args, options, policy_options, out, err)

    # heavy: OpenCV; start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.cli.run_command import _policy_or_exit_code
    from holodesk.automation.errors import AutomationError
    from holodesk.automation.input.performer import InputPerformer
    from holodesk.automation.input.x11.backend import X11Input
    from holodesk.automation.screen import ScreenCapture
    from holodesk.automation.trajectory import default_root

    capture = ScreenCapture()
    try:
        monitor = capture.monitors()[options.monitor - 1]
    except (AutomationError, IndexError) as exc:
        err.write(f"error: cannot capture the screen: {exc}\n")
        return EXIT_CONFIG
    model_options = policy_options(args)
    if isinstance(model_options, int):
        return model_options
    policy = _policy_or_exit_code(model_options, err)
    if isinstance(policy, int):
        return policy
    try:
        browser = MiniWoBBrowser(
            zoom=options.zoom,
            origin=(monitor.rect.left, monitor.rect.top),
            chromium=args.chromium,
            chromedriver=args.chromedriver,
        )
    except BrowserError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    progress = ProgressBar(len(options.tasks) * options.episodes, err, unit="episodes", every=1)
    evaluation = MiniWoBEvaluation(
        browser,
        policy,
        InputPerformer(X11Input(capture=capture)),
        capture,
        options,
        trajectory_root=args.sessions if args.sessions is not None else default_root(),
        session_meta={"backend": args.backend, "profile": args.profile},
        keep_screenshots=policy.profile.budget.keep_screenshots,
    )
    report = MiniWoBReport()
    try:
        evaluation.run(lambda episode: progress.advance(failed=not episode.success, note=episode.task), report)
    except BrowserError as exc:
        progress.close()
        err.write(f"error: {exc}\n")
        return _write_partial(report, f"error: {exc}", options, args.json, err, EXIT_FAILED)
    except KeyboardInterrupt:
        progress.close()
        err.write(f"stopped (Ctrl+C) after {len(report.episodes)} episodes\n")
        return _write_partial(report, "stopped (Ctrl+C)", options, args.json, err, EXIT_STOPPED)
    except BaseException as exc:  # any other end still writes the partial report; re-raised
        _write_partial(report, f"crashed: {type(exc).__name__}: {exc}", options, args.json, err, EXIT_FAILED)
        raise
    finally:
        browser.close()
    progress.close()
    return _print_report(report, args.json, out)


def _miniwob_parallel(
    args: argparse.Namespace, options: MiniWoBOptions, policy_options: PolicyOptionsFor, out: TextIO, err: TextIO
) -> int:
    """`--workers N` / `--ray`: the episodes spread over private desktops (app/eval/parallel.py)."""
    # heavy: OpenCV; start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.cli.run_command import _policy_or_exit_code
    from holodesk.app.eval.parallel import ParallelRun, RunnerStarter, jobs_for
    from holodesk.app.eval.progress import ProgressBar
    from holodesk.app.eval.workers import (
        EpisodeError,
        LocalWorker,
        OptionsPolicySource,
        WorkerSetup,
        WorkerStartError,
    )
    from holodesk.automation.trajectory import default_root

    model_options = policy_options(args)
    if isinstance(model_options, int):
        return model_options
    # The server is checked once here, so a wrong URL stops the run before any desktop starts; a local
    # model is loaded by each worker instead (loading it here too would only cost time).
    if model_options.backend != "local":
        checked = _policy_or_exit_code(model_options, err)
        if isinstance(checked, int):
            return checked
    setup = WorkerSetup(
        options=options,
        policy=OptionsPolicySource(model_options),
        session_meta={"backend": args.backend, "profile": args.profile},
        chromium=args.chromium,
        chromedriver=args.chromedriver,
    )
    start: RunnerStarter
    close_cluster: Callable[[], None] = lambda: None  # noqa: E731 - nothing to close without Ray
    if args.ray is not None:
        # start-up: `holodesk --help` must stay light (bench/startup.py)
        from holodesk.app.eval.ray_backend import ClusterError, RayDesktops

        try:
            desktops = RayDesktops(args.ray, setup)
        except ClusterError as exc:
            err.write(f"error: {exc}\n")
            return EXIT_CONFIG
        start, close_cluster = desktops.start, desktops.close
        slots = args.workers or desktops.offered
    else:
        slots = args.workers or 1

        def start(slot: int) -> LocalWorker:
            return LocalWorker(setup)

    jobs = jobs_for(options)
    progress = ProgressBar(len(jobs), err, unit="episodes", every=1)
    run = ParallelRun(
        jobs,
        start,
        slots,
        args.sessions if args.sessions is not None else default_root(),
        on_episode=lambda episode: progress.advance(failed=not episode.success, note=episode.task),
    )
    # The results are written however the run ends: SIGTERM and SIGHUP (the terminal closed) stop
    # it as Ctrl+C does, and the JSON then says what was finished and what was not.
    try:
        with _signals_as_ctrl_c():
            report = run.run()
    except (WorkerStartError, EpisodeError) as exc:
        progress.close()
        err.write(f"error: {exc}\n")
        return _write_partial(run.report(), f"error: {exc}", options, args.json, err, EXIT_FAILED)
    except KeyboardInterrupt:  # the workers and their desktops are ended already (ParallelRun.run)
        progress.close()
        err.write(f"stopped (Ctrl+C) after {progress.done} episodes; their trajectories are in the sessions folder\n")
        return _write_partial(run.report(), "stopped (Ctrl+C)", options, args.json, err, EXIT_STOPPED)
    except BaseException as exc:  # any other end still writes the partial report; re-raised
        _write_partial(run.report(), f"crashed: {type(exc).__name__}: {exc}", options, args.json, err, EXIT_FAILED)
        raise
    finally:
        close_cluster()
    progress.close()
    return _print_report(report, args.json, out)


@contextlib.contextmanager
def _signals_as_ctrl_c() -> Iterator[None]:
    """While the block runs (on the main thread), SIGTERM and SIGHUP raise KeyboardInterrupt as Ctrl+C does."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {number: signal.signal(number, interrupt) for number in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _write_partial(
    report: MiniWoBReport, why: str, options: MiniWoBOptions, json_path: Path | None, err: TextIO, code: int
) -> int:
    """The JSON of a run that ended early (`why`), naming the episodes it did not finish; returns `code`."""
    report.ended_early(why, options.planned())
    if json_path is not None:
        try:
            _write_json(report, json_path)
        except OSError as exc:
            err.write(f"error: the results could not be written to {json_path}: {exc}\n")
            return code
        err.write(f"results so far ({len(report.episodes)} finished, {len(report.not_finished)} not): {json_path}\n")
    return code


class _Report(Protocol):
    """What an eval command prints: a table for people and JSON for tools."""

    def table(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


def _print_report(report: _Report, json_path: Path | None, out: TextIO) -> int:
    """The report's table on `out`, and its JSON at `json_path` when asked for; the command succeeded."""
    out.write(report.table() + "\n")
    if json_path is not None:
        _write_json(report, json_path)
        out.write(f"results: {json_path}\n")
    return EXIT_OK


def _write_json(report: _Report, json_path: Path) -> None:
    """Write whole or not at all: a temporary file beside it, renamed into place (a kill mid-write
    leaves the last complete results, never half a file)."""
    partial = json_path.with_name(f".{json_path.name}.partial")
    partial.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(partial, json_path)


def _annotate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.common.settings import load_settings, normalize_server_url
    from holodesk.app.eval.annotate import (
        MAX_CONCURRENCY,
        AnnotateInputError,
        BatchAnnotator,
        finished_ids,
        read_items,
    )
    from holodesk.app.eval.progress import ProgressBar
    from holodesk.inference.errors import InferenceError
    from holodesk.inference.model_policy import ModelPolicy
    from holodesk.inference.profiles import get_profile
    from holodesk.inference.remote import RemoteBackend

    if args.concurrency > MAX_CONCURRENCY:
        err.write(f"error: at most {MAX_CONCURRENCY} requests in flight, got {args.concurrency}\n")
        return EXIT_CONFIG
    if not args.output.parent.is_dir():
        err.write(f"error: the folder of {args.output} does not exist\n")
        return EXIT_CONFIG
    # What is not given comes from the settings file, as for `holodesk run`.
    settings = load_settings().settings.model
    urls = list(args.base_url or ([settings.remote.base_url] if settings.remote.base_url else []))
    if not urls:
        err.write("error: give the server with --base-url, or set the server URL in Holodesk's settings\n")
        return EXIT_CONFIG
    try:  # checked as the settings check them: no credentials, controls or absurd hosts in a URL
        urls = [normalize_server_url(url) for url in urls]
    except ValueError as exc:
        err.write(f"error: --base-url: {exc}\n")
        return EXIT_CONFIG
    served = args.model or (settings.remote.model if args.base_url is None else None)
    try:
        items = read_items(args.input)
        profile = get_profile(args.profile or settings.profile)
        # Ask each server for its model once, here, so a wrong URL stops the batch before it starts.
        models = {url: RemoteBackend(url, model=served).model for url in urls}
        # One backend per in-flight slot, the slots dealt to the servers in turn.
        slot_urls = [urls[slot % len(urls)] for slot in range(args.concurrency)]
        backends = [RemoteBackend(url, model=models[url], encoded_images_kept=0) for url in slot_urls]
    except (AnnotateInputError, ValueError) as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    except InferenceError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_FAILED
    already = len({item.id for item in items} & finished_ids(args.output))
    progress = ProgressBar(len(items) - already, err, unit="items", every=max(1, len(items) // 20))
    if already:
        err.write(f"{already} of {len(items)} items were already done; resuming\n")
    if args.ray is not None:
        # start-up: `holodesk --help` must stay light (bench/startup.py)
        from holodesk.app.eval.ray_annotate import annotate_on_ray
        from holodesk.app.eval.ray_backend import ClusterError
        from holodesk.inference.secrets import find_api_key

        try:
            localized, failed = annotate_on_ray(
                args.ray,
                items,
                args.output,
                urls,
                [models[url] for url in urls],
                # Looked up here, where the user's environment and keyring are, and handed to the actors.
                [find_api_key(url).key for url in urls],
                profile.name,
                args.concurrency,
                lambda record: progress.advance(failed="error" in record),
            )
        except ClusterError as exc:
            progress.close()
            err.write(f"error: {exc}\n")
            return EXIT_CONFIG
    else:
        annotator = BatchAnnotator([ModelPolicy(profile, b) for b in backends], [b.base_url for b in backends])
        localized, failed = annotator.run(items, args.output, lambda record: progress.advance(failed="error" in record))
    progress.close()
    out.write(f"localized {localized}, failed {failed}, skipped {already}; results in {args.output}\n")
    return EXIT_OK if failed == 0 else EXIT_FAILED


def _grounding(args: argparse.Namespace, policy_options: PolicyOptionsFor, out: TextIO, err: TextIO) -> int:
    # heavy: OpenCV; start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.cli.run_command import _policy_or_exit_code
    from holodesk.app.eval.grounding import GroundingSetError, read_grounding_set, score_set
    from holodesk.app.eval.progress import ProgressBar

    try:
        items = read_grounding_set(args.file)
    except GroundingSetError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    if args.json is not None and not args.json.parent.is_dir():
        err.write(f"error: the folder of {args.json} does not exist\n")
        return EXIT_CONFIG
    options = policy_options(args)
    if isinstance(options, int):
        return options
    policy = _policy_or_exit_code(options, err)
    if isinstance(policy, int):
        return policy
    progress = ProgressBar(len(items), err, unit="items", every=max(1, len(items) // 20))
    report = score_set(policy, items, lambda result: progress.advance(failed=result.error is not None))
    progress.close()
    return _print_report(report, args.json, out)


def _make_grounding(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.eval.grounding import GroundingSetError, items_from_corrections
    from holodesk.app.eval.grounding import write_grounding_set as write_set

    if not args.miniwob_tasks and not args.corrections:
        err.write("error: name --miniwob-tasks, --corrections, or both\n")
        return EXIT_CONFIG
    if not args.output.parent.is_dir():
        err.write(f"error: the folder of {args.output} does not exist\n")
        return EXIT_CONFIG
    items: list[GroundingItem] = []
    try:
        for path in args.corrections:
            items.extend(items_from_corrections(path))
    except (GroundingSetError, OSError) as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    if args.miniwob_tasks:
        # start-up: `holodesk --help` must stay light (bench/startup.py)
        from holodesk.app.eval.miniwob_browser import BrowserError

        try:
            items.extend(_miniwob_pages(args, err))
        except (BrowserError, ValueError) as exc:
            err.write(f"error: {exc}\n")
            return EXIT_CONFIG
    count = write_set(args.output, items)
    out.write(f"wrote {count} items to {args.output}\n")
    return EXIT_OK


def _miniwob_pages(args: argparse.Namespace, err: TextIO) -> list[GroundingItem]:
    """Grounding items from MiniWoB pages opened on this display, screenshots beside the output."""
    import time

    # start-up: `holodesk --help` must stay light (bench/startup.py)
    from holodesk.app.eval.grounding import PAGE_ELEMENTS_JS, items_from_page
    from holodesk.app.eval.miniwob_browser import MiniWoBBrowser, task_names
    from holodesk.app.eval.miniwob_eval import parse_task_list
    from holodesk.automation.screen import ScreenCapture

    tasks = parse_task_list(args.miniwob_tasks, task_names())
    images = args.output.parent / f"{args.output.stem}-images"
    images.mkdir(exist_ok=True)
    capture = ScreenCapture()
    monitor = capture.monitors()[0]
    items: list[GroundingItem] = []
    with MiniWoBBrowser(zoom=args.zoom, origin=(monitor.rect.left, monitor.rect.top)) as browser:
        for task in tasks:
            browser.open_task(task)
            for seed in range(args.seed, args.seed + args.episodes):
                browser.start_episode(seed, 60)
                time.sleep(0.3)  # let the page draw (jQuery-UI widgets animate in)
                frame = capture.grab(1)
                path = images / f"{task}-{seed}.png"
                frame.to_image().save(path)
                items.extend(items_from_page(browser.boxes(PAGE_ELEMENTS_JS), frame, path, task))
                browser.end_episode()
    return items
