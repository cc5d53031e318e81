"""`holodesk history` and `holodesk export-corrections`: read recorded sessions from the terminal.

The list is an aligned table (newest first): when, outcome, steps taken, task, folder name. One
session shows each step: what actually ran, the decision, the result in words and the timings; a
result too long for its column (a routine step the replay flagged, with why) follows the table in full.
Text that came from the model is shown with control characters escaped.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TextIO

from holodesk.app.common.session_words import session_words, step_words
from holodesk.automation.trajectory import export_corrections, iter_session_folders, read_session

TASK_WIDTH = 48
RESULT_WIDTH = 40
MAX_LISTED_MATCHES = 10
EXIT_BAD_ARGUMENTS = 2  # as for every command (holodesk --help's exit codes)


def _shown(text: str) -> str:
    """One line, safe for a terminal: control characters written as escape codes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(rows: list[list[str]], out: TextIO, right: frozenset[int] = frozenset()) -> None:
    """Columns padded to their widest cell; the last column is not padded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else (cell if i == len(row) - 1 else cell.ljust(widths[i]))
            for i, cell in enumerate(row)
        ]
        out.write("  ".join(cells).rstrip() + "\n")


def list_sessions(root: Path, out: TextIO) -> int:
    folders = list(iter_session_folders(root))
    if not folders:
        out.write(f"no sessions under {root}\n")
        return 0
    task_width = max(20, min(TASK_WIDTH, shutil.get_terminal_size((120, 24)).columns - 70))
    rows = [["STARTED", "OUTCOME", "STEPS", "TASK", "SESSION"]]
    for folder in reversed(folders):  # newest first, as a person looks for the last run
        words = session_words(read_session(folder))
        task = _clip(_shown(words.task), task_width)
        rows.append([words.started, words.outcome, str(words.steps_taken), task, folder.name])
    _table(rows, out, right=frozenset({2}))
    return 0


def show_session(root: Path, name: str, out: TextIO, err: TextIO, as_json: bool = False) -> int:
    """Print one session; a name that matches none or several is a bad argument (exit 2, said on `err`)."""
    folder = Path(name) if Path(name).is_dir() else root / name
    if not (folder / "session.jsonl").is_file():
        matches = [f for f in iter_session_folders(root) if f.name.startswith(name)]
        if not matches:
            err.write(f"no session matches {_shown(name)!r} under {root}\n")
            return EXIT_BAD_ARGUMENTS
        if len(matches) > 1:
            err.write(f"{len(matches)} sessions start with {_shown(name)!r}; give more of the name:\n")
            for match in matches[-MAX_LISTED_MATCHES:]:
                err.write(f"  {match.name}\n")
            if len(matches) > MAX_LISTED_MATCHES:
                err.write(f"  (and {len(matches) - MAX_LISTED_MATCHES} older)\n")
            return EXIT_BAD_ARGUMENTS
        folder = matches[0]
    session = read_session(folder)
    if as_json:
        out.write(json.dumps({"header": session.header, "steps": session.steps, "end": session.end}, indent=1) + "\n")
        return 0
    words = session_words(session)
    out.write(f"task:     {_shown(words.task)}\nstarted:  {words.started}\nfolder:   {folder}\n")
    out.write(f"outcome:  {words.outcome}, {words.steps_taken} step{'s' if words.steps_taken != 1 else ''} taken\n")
    if words.detail:
        out.write(f"detail:   {_shown(words.detail)}\n")
    if session.steps:
        out.write("\n")
        rows = [["STEP", "DECISION", "WHAT RAN", "RESULT", "TIMINGS"]]
        cut: list[tuple[str, str]] = []  # results too long for their column, said in full below it
        for step in session.steps:
            said = step_words(step)
            ran = _shown(said.ran) + (f" (proposed: {_shown(said.proposed)})" if said.proposed else "")
            result = _shown(said.result)
            if len(result) > RESULT_WIDTH:
                cut.append((said.index, result))
            rows.append([said.index, said.decision, _clip(ran, 70), _clip(result, RESULT_WIDTH), said.timings])
        _table(rows, out, right=frozenset({0}))
        for index, result in cut:  # a flag's reason must not be lost to the column's width
            out.write(f"step {index}: {result}\n")
        shots = [(step.get("index", "?"), step["screenshot"]) for step in session.steps if step.get("screenshot")]
        if shots:
            out.write(f"\nscreenshots in {folder / 'screenshots'}\n")
    for warning in session.warnings:
        out.write(f"warning: {warning}\n")
    return 0


def export(root: Path, target: Path, out: TextIO, err: TextIO | None = None) -> int:
    """Write the corrections; a missing sessions folder or an unwritable target is an error (exit 2)."""
    err = err or out
    if not root.is_dir():
        err.write(f"error: there is no sessions folder at {root}; give the folder with --sessions\n")
        return 2
    if not target.parent.is_dir():
        err.write(f"error: the folder {target.parent} does not exist; create it first or choose another file\n")
        return 2
    try:
        count = export_corrections(root, target)
    except OSError as exc:
        err.write(f"error: cannot write {target}: {exc.strerror or exc}\n")
        return 2
    out.write(f"wrote {count} correction{'s' if count != 1 else ''} to {target}\n")
    if count == 0:
        sessions = sum(1 for _ in iter_session_folders(root))
        err.write(
            f"warning: none of the {sessions} session{'s' if sessions != 1 else ''} under {root} has a moved target "
            "(corrections come from steps where you dragged or typed a new target)\n"
        )
    return 0
