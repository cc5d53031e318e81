"""`holodesk --version` and `--help` import only what they use (issue 33: <= 0.3 s to start).

Timing is bench/startup.py's job; a test would race the machine's load. What a test can see for
sure is the cause: which modules a fresh interpreter has loaded after printing the version or the
help. The engine, the settings module, numpy, PIL and the profiles cost ~250 ms together and none is
needed to parse the command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from holodesk.app.common import choices
from holodesk.inference.profiles import DEFAULT_PROFILE, PROFILE_NAMES, get_profile

HEAVY = (
    "numpy",
    "PIL",
    "keyring",
    "holodesk.automation.engine",
    "holodesk.app.common.settings",
    "holodesk.inference.profiles",
    "holodesk.inference.checkpoint",
)

PROBE = """
import contextlib, io, json, sys
from holodesk.app.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps({"out": out.getvalue(), "modules": sorted(sys.modules)}))
"""


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["run", "--help"], ["doctor", "--help"]])
def test_parsing_the_command_line_loads_nothing_heavy(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60, check=True)
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["out"].strip(), "the command printed nothing"
    loaded = [name for name in HEAVY if name in report["modules"]]
    assert not loaded, f"holodesk {' '.join(argv)} imported {loaded}"


def test_the_parser_offers_the_profiles_there_are() -> None:
    assert choices.PROFILE_NAMES == PROFILE_NAMES
    assert tuple(name for name in PROFILE_NAMES if get_profile(name).runs_in_process) == choices.IN_PROCESS_PROFILES
    assert choices.DEFAULT_PROFILE == DEFAULT_PROFILE


WAIT_POLICY_PROBE = """
import contextlib, io, os, sys
from holodesk.app.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(["--version"])
    except SystemExit:
        pass
print(os.environ.get("OMP_WAIT_POLICY", "unset"))
"""


@pytest.mark.parametrize(("given", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_holodesk_lets_openmp_threads_sleep_unless_the_user_chose(given: str | None, expected: str) -> None:
    """OpenMP reads OMP_WAIT_POLICY when torch loads: set before any command runs, a user's own value kept
    (spinning threads made the model's CPU decode many times slower beside busy programs:
    bench/cpu_wait_policy.py)."""
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    done = subprocess.run(
        [sys.executable, "-c", WAIT_POLICY_PROBE], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == expected, done.stderr
