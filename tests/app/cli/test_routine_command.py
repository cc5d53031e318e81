"""`holodesk routine save` and `list` through the command line, on a recorded session."""

from __future__ import annotations

import io
import sys

from bench.rigs.routine_scenes import Button, click_step, record_session, screen
from holodesk.app.cli.main import main
from holodesk.automation.routines.routine_file import load_routine

OK = Button("OK", 100, 100)


def typing(text: str) -> dict[str, object]:
    return {
        "action_model": {"kind": "type"},
        "action_screen": {"kind": "type", "text": text, "at": None, "press_enter": False, "overwrite": False},
        "element": "the search box",
        "decision": "approve",
        "result": {"ok": True, "detail": "typed"},
    }


def test_save_asks_about_each_parameter_then_list_shows_the_routine(tmp_path, monkeypatch, capsys):
    frame = screen([OK])
    session = record_session(
        tmp_path / "sessions",
        "search for blue shoes",
        [(frame, click_step(*OK.centre, "the OK button")), (frame, typing("blue shoes"))],
        end=frame,
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO("query\n"))  # rename the proposed parameter
    routines = tmp_path / "routines"
    code = main(
        [
            "routine",
            "save",
            session.folder.name[:15],
            "shoes",
            "--sessions",
            str(tmp_path / "sessions"),
            "--routines",
            str(routines),
        ]
    )
    said = capsys.readouterr().out
    assert code == 0, said
    assert "parameter search = 'blue shoes'" in said and "saved the routine 'shoes': 2 steps" in said
    routine = load_routine(routines / "shoes")
    assert [(p.name, p.default) for p in routine.parameters] == [("query", "blue shoes")]
    assert routine.steps[1].text_parameter == "query"

    assert main(["routine", "list", "--routines", str(routines)]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split() == ["NAME", "STEPS", "PARAMETERS", "TASK"]
    assert listing[1].split() == ["shoes", "2", "query", "search", "for", "blue", "shoes"]


def test_a_broken_routine_is_listed_with_what_is_wrong(tmp_path, capsys):
    folder = tmp_path / "routines" / "broken"
    folder.mkdir(parents=True)
    (folder / "routine.toml").write_text('format = "holodesk routine"\nversion = 2\n')
    assert main(["routine", "list", "--routines", str(tmp_path / "routines")]) == 0
    assert "cannot be read: version: this Holodesk reads version 1, the file says 2" in capsys.readouterr().out


def test_an_unknown_session_is_an_error_in_words(tmp_path, capsys):
    code = main(["routine", "save", "nope", "x", "--sessions", str(tmp_path), "--routines", str(tmp_path / "r")])
    assert code == 2
    assert "no session matches 'nope'" in capsys.readouterr().err
