"""Start-up: how long `holodesk --version`, `--help` and the first line of `holodesk run` take (issue 33).

Each figure is the wall time of a fresh process, from spawn to its exit (`--version`, `--help`) or to
the first line it prints (`run`: the remote backend against the test server on 127.0.0.1, on an Xvfb
screen, the process killed once its first line is read). The baseline is a bare interpreter of the
same venv (`python -c pass`): what no import change can remove. All cases run interleaved, round by
round, so the noise of a shared machine falls on all of them alike. The goals are the issue's, for a
quiet machine: 300 ms for `--version` and `--help`, 1 s for the first line of `run`.

    python -m bench --only startup          # or: python -m bench.startup [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.harness import BenchResult, BenchSettings, format_table, interleaved, machine_description, write_results
from bench.rigs.fake_openai_server import DEFAULT_MODEL, FakeOpenAIServer

NAME = "startup"
COMMAND = (sys.executable, "-m", "holodesk.app.cli")  # what the `holodesk` console script runs
FIRST_LINE_TIMEOUT_S = 60.0
# The parser used to import the settings module (engine, checkpoint, numpy, keyring) to list the
# backends: timed as a process of its own, it shows what `--version` and `--help` no longer pay.
SETTINGS_IMPORT = "import settings (old cost)"


def _exits(argv: Sequence[str], env: dict[str, str]) -> Callable[[], object]:
    def case() -> object:
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
        return done

    return case


def _first_line(argv: Sequence[str], env: dict[str, str]) -> Callable[[], object]:
    def case() -> object:
        process = subprocess.Popen(
            argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()  # bounded: the process is killed below whatever it printed
        finally:
            process.kill()
            process.communicate(timeout=FIRST_LINE_TIMEOUT_S)
        if not line.startswith("task: "):
            raise RuntimeError(f"holodesk run's first line is not the task: {line!r}")
        return line

    return case


def run(settings: BenchSettings) -> BenchResult:
    # looked up when called: tests replace it at its source
    from holodesk.automation.virtual_display import start_xvfb

    result = BenchResult(NAME)
    rounds = settings.rounds(10)
    with tempfile.TemporaryDirectory(prefix="holodesk-bench-startup-") as home, FakeOpenAIServer() as server:
        xvfb = start_xvfb(1280, 800)
        try:
            # A user's first start: no settings file, nothing cached, X11 only. A runtime folder of its
            # own too: in the shared one, a marker that a killed run on another display of the same
            # number had left made `holodesk run` say so before the task (a test run saw it).
            runtime = Path(home, "runtime")
            runtime.mkdir(mode=0o700)
            env = xvfb.env()
            env.update(
                HOME=home,
                XDG_CONFIG_HOME=str(Path(home, "config")),
                XDG_DATA_HOME=str(Path(home, "data")),
                XDG_CACHE_HOME=str(Path(home, "cache")),
                XDG_RUNTIME_DIR=str(runtime),
                PYTHONUNBUFFERED="1",
            )
            env.pop("HOLODESK_BACKEND", None)
            run_argv = [*COMMAND, "run", "Open the menu", "--backend", "remote", "--base-url", server.base_url]
            cases = {
                "python -c pass": _exits([sys.executable, "-c", "pass"], env),
                "holodesk --version": _exits([*COMMAND, "--version"], env),
                "holodesk --help": _exits([*COMMAND, "--help"], env),
                SETTINGS_IMPORT: _exits([sys.executable, "-c", "import holodesk.app.common.settings"], env),
                "holodesk run: first line": _first_line([*run_argv, "--model", DEFAULT_MODEL], env),
            }
            stats = interleaved(cases, rounds, warmup=settings.warmup)
        finally:
            xvfb.stop()
    base = "python -c pass"
    result.add(base, stats[base], note="the interpreter alone: the floor")
    result.add("holodesk --version", stats["holodesk --version"], baseline=base, goal=300.0)
    result.add("holodesk --help", stats["holodesk --help"], baseline=base, goal=300.0)
    result.add(SETTINGS_IMPORT, stats[SETTINGS_IMPORT], baseline=base, note="what --version imported before issue 33")
    result.add(
        "holodesk run: first line",
        stats["holodesk run: first line"],
        baseline=base,
        goal=1000.0,
        note="remote backend, test server on 127.0.0.1, Xvfb",
    )
    result.notes.append(f"{rounds} rounds interleaved, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="measured rounds (scaled: 15 gives 10)")
    parser.add_argument("--output", type=Path, help="also write the JSON results here")
    arguments = parser.parse_args(argv)
    started = time.perf_counter()
    result = run(BenchSettings(repeats=arguments.repeats))
    print(format_table(result.figures))
    for note in result.notes:
        print(f"[{NAME}] {note}")
    if arguments.output is not None:
        write_results(arguments.output, [result], machine_description(), time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
