"""Write holodesk(1) from the command's own parser, so the man page says what `holodesk --help` says.

    python packaging/debian/manpage.py > holodesk.1

Sections: the synopsis, the tray application's options, every command with its help line and its
options (as `holodesk COMMAND --help` prints them), the exit codes (the parser's epilog), the files.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Iterator

from holodesk.app.cli.main import EPILOG, _version, build_parser


def _roff(text: str) -> str:
    """Text safe in a roff line: backslashes and hyphens escaped, no line starting with a dot."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text.startswith((".", "'")) else text


def _options(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:  # argparse offers no public walk over a parser's options
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            metavar = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
            if action.choices and action.nargs != 0:
                metavar = " {" + ",".join(map(str, action.choices)) + "}"
            name = ", ".join(f"\\fB{_roff(o)}\\fR" for o in action.option_strings) + _roff(metavar)
        else:
            name = f"\\fI{_roff(action.metavar or action.dest)}\\fR"
        yield ".TP"
        yield name
        yield _roff(action.help or "")


def _commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def manpage() -> str:
    parser = build_parser()
    today = datetime.date.today().isoformat()
    lines = [
        f'.TH HOLODESK 1 "{today}" "holodesk {_version()}" "User Commands"',
        ".SH NAME",
        "holodesk \\- " + _roff((parser.description or "").rstrip(".").lower()),
        ".SH SYNOPSIS",
        "\\fBholodesk\\fR [\\fIOPTIONS\\fR]",
        ".br",
        "\\fBholodesk\\fR \\fICOMMAND\\fR [\\fIARGUMENTS\\fR]",
        ".SH DESCRIPTION",
        "Without a command, \\fBholodesk\\fR starts the tray application (or asks the one already running "
        "to show itself). Its options replace the settings file's values for this start.",
        ".SH OPTIONS",
        *_options(parser),
        ".SH COMMANDS",
    ]
    for name, help_text, sub in _commands(parser):
        lines += [".SS " + _roff(name), _roff(help_text)]
        for subname, subhelp, subsub in _commands(sub):
            lines += [".TP", f"\\fB{_roff(name)} {_roff(subname)}\\fR", _roff(subhelp)]
            lines += [".RS", *_options(subsub), ".RE"]
        lines += list(_options(sub))
    lines += [
        ".SH EXIT STATUS",
        *[_roff(line) + "\n.br" for line in EPILOG.splitlines()],
        ".SH FILES",
        ".TP",
        "\\fI~/.config/holodesk/settings.toml\\fR",
        "The settings (the tray application's Settings window writes it).",
        ".TP",
        "\\fI~/.local/share/holodesk/\\fR",
        "Recorded sessions and routines: the user's data, kept when the package is purged.",
        ".TP",
        "\\fI/usr/share/holodesk/holodesk\\-autostart.desktop\\fR",
        "Copy it to \\fI~/.config/autostart/\\fR to start the tray application at login. After a purge the copy "
        "does nothing (its TryExec names the removed command); delete it to tidy up.",
        ".TP",
        "\\fI/usr/share/holodesk/holotron\\-requirements.txt\\fR",
        "The in\\-process backend (a GPU in this computer): "
        "\\fBsudo /usr/lib/holodesk/bin/pip install \\-r\\fR this file (not \\fBpython \\-m pip\\fR, which as "
        "root would first run a \\fIpip.py\\fR in the current folder).",
        ".TP",
        "\\fI/usr/share/holodesk/eval\\-requirements.txt\\fR, \\fIcluster\\-requirements.txt\\fR",
        "What \\fBholodesk eval miniwob\\fR and \\fB\\-\\-ray\\fR need, installed the same way.",
        ".SH SEE ALSO",
        "\\fBholodesk \\fICOMMAND\\fB \\-\\-help\\fR",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(manpage())
