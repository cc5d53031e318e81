"""The engine benchmark's reference: an earlier commit's step engine, driven by today's bench code.

`bench.engine` measures today's engine and, interleaved with it in the same run, the engine as it
was at REFERENCE_COMMIT (before issue #10's "the step never waits for the PNG"). The reference's
packages come from `git archive` into a temporary folder, and run in a child process
(`python -m bench.engine_reference_child FOLDER`) whose `holodesk` resolves to that folder: one
process cannot hold two versions of a package. The child answers each "run" line on its stdin with one
JSON line, the milliseconds per part of each measured step of one engine run on the same Xvfb.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import IO, Any

# The main branch just before the change (git merge-base of wip/10 and main when it was made).
REFERENCE_COMMIT = "d51bf56fc2d007a8aa521cae90c6560b71d69c23"
PACKAGES = ("app", "automation", "inference", "assets")  # the folders pyproject maps onto holodesk.*
REPOSITORY = Path(__file__).resolve().parent.parent


class ReferenceUnavailable(RuntimeError):
    """The reference engine cannot be run here (no git checkout, or the commit is not in it)."""


class ReferenceEngine:
    """A child process running REFERENCE_COMMIT's engine, one run per `run()`."""

    def __init__(self, commit: str = REFERENCE_COMMIT) -> None:
        self.commit = commit
        self._folder = tempfile.TemporaryDirectory(prefix="holodesk-bench-reference-")
        try:
            export_packages(commit, Path(self._folder.name))
        except ReferenceUnavailable:
            self._folder.cleanup()
            raise
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.engine_reference_child", self._folder.name],
            cwd=REPOSITORY,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self) -> dict[str, list[float]]:
        """One engine run of the reference; its parts in milliseconds (steps 2.. of the run)."""
        stdin, stdout = _pipes(self._process)
        stdin.write("run\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"the reference engine's process ended (exit status {self._process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the reference engine failed: {answer['error']}")
        return {str(part): [float(value) for value in values] for part, values in answer["parts"].items()}

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._folder.cleanup()


def _pipes(process: subprocess.Popen[str]) -> tuple[IO[str], IO[str]]:
    assert process.stdin is not None and process.stdout is not None
    return process.stdin, process.stdout


def export_packages(commit: str, folder: Path) -> None:
    """Write `commit`'s packages under folder/holodesk/ (as an install lays them out)."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPOSITORY), "archive", "--format=tar", commit, "--", *PACKAGES],
            capture_output=True,
            check=True,
        ).stdout
    except FileNotFoundError as exc:
        raise ReferenceUnavailable("git is not installed") from exc
    except subprocess.CalledProcessError as exc:
        reason = exc.stderr.decode(errors="replace").strip() or f"exit status {exc.returncode}"
        raise ReferenceUnavailable(f"git archive {commit[:10]} failed: {reason}") from exc
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder / "holodesk", filter="data")
