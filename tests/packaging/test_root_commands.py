"""No command Holodesk gives for root runs code from the folder the person happens to be in.

`python -m MODULE` puts the current folder first on the module path, so `sudo .../python -m pip`
started in a folder where another local user left a `pip.py` runs that file as root (issue 48). This
scans what a person reads (the README, docs/, the man page as built, the packaging files) and what the
product says (every string in its sources) for a `sudo ... python -m` without `-P` (or `-I`, which
implies it), and the Debian maintainer scripts, which run as root, for any `python -m` without it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("app", "automation", "inference", "bench", "packaging", "docs")
SUFFIXES = {".md", ".py", ".sh", ".txt", ".in", ".desktop", ".xml", ".toml", ".cfg", ""}
MAINTAINER_SCRIPTS = ("preinst", "postinst", "prerm", "postrm")

# A sudo command, up to where a shell or the surrounding text ends it (a quote, a backtick, a bracket).
_SUDO = re.compile(r"\bsudo\b(?P<command>[^`;&|\"'()\n]*)")
# A Python interpreter started with -m, and the single-letter options before it.
_PYTHON_M = re.compile(r"(?:^|[\s/])python[0-9.]*(?P<options>(?:\s+-[A-Za-z]+)*)\s+-m\b")


def _reads_current_folder(command: str) -> bool:
    """True when `command` starts Python with -m and neither -P nor -I keeps the current folder off the path."""
    found = _PYTHON_M.search(command)
    if found is None:
        return False
    letters = "".join(option.lstrip("-") for option in found.group("options").split())
    return "P" not in letters and "I" not in letters


def _plain(text: str, suffix: str) -> str:
    """The text as a person reads it: roff escapes undone, Python's adjacent string pieces joined, lines unwrapped."""
    text = re.sub(r"\\f[BIRP]|\\&", "", text).replace("\\-", "-")
    if suffix == ".py":
        text = re.sub(r"[\"']\s*\n\s*[rfb]?[\"']", "", text)  # "sudo ... python "\n "-m pip" is one message
    if suffix == ".md":
        text = re.sub(r"\s*\n\s*", " ", text)  # a wrapped paragraph is one line
    return text


def root_commands_reading_the_current_folder(text: str, suffix: str = "") -> list[str]:
    """Every `sudo ... python -m` in `text` that would put the current folder on root's module path."""
    return [
        match.group(0).strip()
        for match in _SUDO.finditer(_plain(text, suffix))
        if _reads_current_folder(match.group("command"))
    ]


def _texts() -> list[tuple[str, str, str]]:
    """(name, suffix, text) of every file a person reads or the product speaks from, and the built man page."""
    files = [REPO / "README.md"]
    for top in SOURCES:
        files += [p for p in sorted((REPO / top).rglob("*")) if p.is_file() and p.suffix in SUFFIXES]
    texts = []
    for path in files:
        if "__pycache__" in path.parts:
            continue
        try:
            texts.append((str(path.relative_to(REPO)), path.suffix, path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            continue  # a picture or other binary file: nothing a person types
    man = subprocess.run(
        [sys.executable, str(REPO / "packaging" / "debian" / "manpage.py")],
        capture_output=True, text=True, check=True, cwd=REPO,
    )  # fmt: skip
    texts.append(("holodesk.1 (as built)", ".1", man.stdout))
    return texts


def test_the_checker_tells_a_root_command_that_reads_the_current_folder_from_one_that_does_not() -> None:
    """The scan below could pass by matching nothing: these show what it flags and what it lets through."""
    assert root_commands_reading_the_current_folder("`sudo /usr/lib/holodesk/bin/python -m pip install -r x`", ".md")
    assert root_commands_reading_the_current_folder("run sudo python3.11 -u -m pip\ninstall", ".md")
    assert root_commands_reading_the_current_folder('"sudo /opt/bin/python "\n    "-m pip install"', ".py")
    assert root_commands_reading_the_current_folder("\\fBsudo /usr/lib/holodesk/bin/python \\-m pip\\fR", ".1")
    assert not root_commands_reading_the_current_folder("`sudo /usr/lib/holodesk/bin/python -P -m pip install`")
    assert not root_commands_reading_the_current_folder("`sudo python3 -I -m pip install`")
    assert not root_commands_reading_the_current_folder("`sudo /usr/lib/holodesk/bin/pip install -r x`")
    assert not root_commands_reading_the_current_folder("`.venv/bin/python -m pip install` then `sudo apt install`")


def test_no_sudo_command_in_the_docs_man_page_or_messages_runs_python_m_from_the_current_folder() -> None:
    texts = _texts()
    names = {name for name, _, _ in texts}
    assert {"README.md", "holodesk.1 (as built)", "packaging/debian/build-deb.sh", "app/cli/doctor.py"} <= names
    found = [
        f"{name}: {command}"
        for name, suffix, text in texts
        for command in root_commands_reading_the_current_folder(text, suffix)
    ]
    assert found == [], "root commands that run code from the current folder (use bin/pip or python -P):\n" + (
        "\n".join(found)
    )


@pytest.mark.parametrize("script", MAINTAINER_SCRIPTS)
def test_the_maintainer_scripts_run_python_without_the_current_folder(script: str) -> None:
    """dpkg runs them as root, from wherever apt was started: every `python -m` there needs -P."""
    path = REPO / "packaging" / "debian" / script
    if not path.exists():
        pytest.skip(f"the package has no {script}")
    bad = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if _reads_current_folder(line)]
    assert bad == [], f"{script} runs python -m as root with the current folder on the path: {bad}"


def test_the_documented_forms_do_not_run_a_pip_py_planted_in_the_current_folder(tmp_path: Path) -> None:
    """A real planted pip.py: plain `python -m pip` runs it (what issue 48 saw as root); the environment's own
    `bin/pip` and `python -P -m pip`, the forms the docs give, run the real pip."""
    planted = tmp_path / "pip.py"
    planted.write_text("print('PLANTED pip.py ran')\n", encoding="utf-8")
    python = Path(sys.executable)
    pip = python.with_name("pip")
    assert pip.is_file(), f"no {pip}: the environment has no pip of its own"

    def said(*argv: str) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False)
        return done.stdout + done.stderr

    assert "PLANTED pip.py ran" in said(str(python), "-m", "pip", "--version")  # the hazard is real here
    for argv in ([str(pip), "--version"], [str(python), "-P", "-m", "pip", "--version"]):
        output = said(*argv)
        assert "PLANTED" not in output and output.startswith("pip "), (argv, output)
