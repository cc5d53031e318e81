"""A temp folder too long for Chromium's socket is refused in words before Chromium starts.

Chromium makes its singleton socket a few folders below TMPDIR, and a Unix socket's path holds 107
bytes; past that Chromium exits at start and chromedriver says only "Chrome instance exited". Checked
against the real Chromium: a temp folder of exactly the length the check allows starts it, one
character more is refused in our words, and a parallel eval's worker says so through its start error.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodesk.app.eval.miniwob_browser import (
    SCRATCH_PREFIX,
    SOCKET_PATH_MAX,
    SOCKET_TAIL_BYTES,
    TEMP_NAME_CHARS,
    BrowserError,
    MiniWoBBrowser,
)
from holodesk.app.eval.miniwob_eval import MiniWoBOptions
from holodesk.app.eval.workers import ROOT_PREFIX, LocalWorker, WorkerSetup, WorkerStartError
from tests.app.eval.oracle_source import OracleSource

pytestmark = [pytest.mark.display, pytest.mark.chromium]

# The longest temp folder one browser may run under (40 bytes with today's names).
LONGEST_FOR_ONE_BROWSER = SOCKET_PATH_MAX - (1 + len(SCRATCH_PREFIX) + TEMP_NAME_CHARS + SOCKET_TAIL_BYTES)


@pytest.fixture
def temp_folder_of(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Makes a temp folder of exactly the asked length in /tmp and makes it this process's."""
    made: list[Path] = []

    def make(length: int) -> Path:
        folder = Path(tempfile.mkdtemp(prefix="d" * (length - len("/tmp/") - TEMP_NAME_CHARS), dir="/tmp"))
        made.append(folder)
        assert len(str(folder)) == length
        monkeypatch.setattr(tempfile, "tempdir", str(folder))
        return folder

    yield make
    for folder in made:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_longest_allowed_temp_folder_starts_chromium_and_one_more_character_is_refused(xvfb, temp_folder_of):
    assert LONGEST_FOR_ONE_BROWSER == 40
    temp_folder_of(LONGEST_FOR_ONE_BROWSER)
    browser = MiniWoBBrowser(zoom=1.0)
    try:
        browser.open_task("click-button")
        assert browser.state().done is False  # the task page answers
    finally:
        browser.close()

    folder = temp_folder_of(LONGEST_FOR_ONE_BROWSER + 1)
    with pytest.raises(BrowserError, match=r"its socket's path would be 108 bytes.*1 character shorter") as refused:
        MiniWoBBrowser(zoom=1.0)
    assert str(folder) in str(refused.value)
    assert list(folder.iterdir()) == []  # nothing made, nothing started


def test_a_parallel_evals_worker_under_a_long_temp_folder_says_why_it_cannot_start(temp_folder_of):
    """A worker's root adds a folder of its own: 18 characters are one too many there."""
    longest_for_a_worker = LONGEST_FOR_ONE_BROWSER - (1 + len(ROOT_PREFIX) + TEMP_NAME_CHARS)
    assert longest_for_a_worker == 17  # what docs/parallel-runs.md promises
    temp_folder_of(longest_for_a_worker + 1)
    options = MiniWoBOptions(tasks=("click-button",), episodes=1)
    with pytest.raises(WorkerStartError, match=r"would be 108 bytes.*1 character shorter"):
        LocalWorker(WorkerSetup(options=options, policy=OracleSource()), start_timeout_s=120)
