"""`holodesk history` and `holodesk export-corrections`: read recorded sessions from the terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from holodesk.automation.trajectory import export_corrections, iter_session_folders, read_session


def list_sessions(root: Path, out: TextIO) -> int:
    folders = list(iter_session_folders(root))
    if not folders:
        out.write(f"no sessions under {root}\n")
        return 0
    for folder in reversed(folders):  # newest first, as a person looks for the last run
        session = read_session(folder)
        out.write(f"{folder.name}  {len(session.steps):3d} steps  {session.outcome:<10}  {session.task}\n")
    return 0


def show_session(root: Path, name: str, out: TextIO, as_json: bool = False) -> int:
    folder = Path(name) if Path(name).is_dir() else root / name
    if not (folder / "session.jsonl").is_file():
        matches = [f for f in iter_session_folders(root) if f.name.startswith(name)]
        if len(matches) != 1:
            out.write(f"no single session matches {name!r} under {root}\n")
            return 1
        folder = matches[0]
    session = read_session(folder)
    if as_json:
        out.write(json.dumps({"header": session.header, "steps": session.steps, "end": session.end}, indent=1) + "\n")
        return 0
    out.write(f"task:    {session.task}\nfolder:  {folder}\noutcome: {session.outcome}\n")
    if session.end and session.end.get("detail"):
        out.write(f"detail:  {session.end['detail']}\n")
    for step in session.steps:
        what = step.get("action_text") or step.get("error") or step.get("decision", "")
        result = step.get("result") or {}
        status = "" if not result else (" ok" if result.get("ok") else f" FAILED: {result.get('detail', '')}")
        out.write(f"  {step.get('index', '?'):>3}  {step.get('decision', '-'):<8} {what}{status}\n")
        if step.get("screenshot"):
            out.write(f"       {folder / step['screenshot']}\n")
    for warning in session.warnings:
        out.write(f"warning: {warning}\n")
    return 0


def export(root: Path, target: Path, out: TextIO) -> int:
    count = export_corrections(root, target)
    out.write(f"wrote {count} correction{'s' if count != 1 else ''} to {target}\n")
    return 0
