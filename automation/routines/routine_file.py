"""The routine file: one folder per routine with a readable, versioned `routine.toml` and its crops.

    <routines folder>/<name>/routine.toml     what to do, step by step (a person may edit it)
    <routines folder>/<name>/crops/*.png      each target as it looked when recorded, and its context
    <routines folder>/<name>/revisions/*.toml earlier versions, kept when a repair is written back

Points are screen pixels as recorded; at replay each pointing step finds its target again (see
`locators`) and the recorded point only says where to look first. A typing step's text is either
literal or a parameter (`text_parameter`), whose value `--set NAME=VALUE` replaces. An optional
`hotkey = "<ctrl>+<alt>+1"` starts the routine from the tray app; it follows the app's own hotkey
rules (`holodesk.automation.hotkey_syntax`).

Loading checks every field and reports every problem at once, each with where it is
(`steps[2].target.crop: ...`), so a hand edit that broke the file says what to fix.

A click or drag's `button` is one the engine can show: left, right or middle (anything else is
refused at load). A middle button pastes the primary selection, so such a step loads but is shown
every time, with the text it would paste read at replay, whatever "approve all" or the file's
`irreversible` say (automation/approval_rules.py): the agent's middle click can be saved as a
routine, and what it pastes at replay is never the text it pasted when recorded.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from holodesk.automation.actions import Action, TypeText, action_from_dict
from holodesk.automation.errors import ActionError, AutomationError
from holodesk.automation.hotkey_syntax import HotkeySyntaxError, check_hotkey
from holodesk.automation.routines.pictures import check_picture, make_private, private_folder, write_private

FORMAT_NAME = "holodesk routine"
FORMAT_VERSION = 1
ROUTINE_FILE = "routine.toml"
CROPS_DIR = "crops"
REVISIONS_DIR = "revisions"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$")
PARAMETER_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


class RoutineFileError(AutomationError):
    """A routine file that cannot be used; `problems` lists each one with where it is."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        listed = "\n".join(f"  {problem}" for problem in problems)
        super().__init__(f"the routine {path} cannot be used:\n{listed}")


def check_name(name: str) -> str:
    """The routine's name, or ValueError saying what a name may hold (it is also its folder's name)."""
    if not NAME_PATTERN.match(name) or name.strip() != name:
        raise ValueError(
            f"a routine's name is 1 to 64 letters, digits, spaces, '.', '_' or '-', starting with a letter or"
            f" digit, got {name!r}"
        )
    return name


@dataclass(frozen=True, slots=True)
class Target:
    """How a pointing step finds its target again.

    `point` is where it was on the screen when recorded; `crop` is a picture of the target around
    it (the point is at `crop_offset` inside), `context` a wider picture around it (a landmark when the
    crop alone matches more than one place). `element` is the model's words for the target (what the
    model looks for when the pictures fail). `nearby_text` and `accessibility_path` are kept when the
    recording had them (empty otherwise).
    """

    point: tuple[int, int]
    crop: str
    crop_offset: tuple[int, int]
    context: str = ""
    context_offset: tuple[int, int] = (0, 0)
    element: str = ""
    nearby_text: tuple[str, ...] = ()
    accessibility_path: str = ""


@dataclass(frozen=True, slots=True)
class ExpectedEffect:
    """What the step did to the screen when recorded: whether it changed, and where.

    `region` is (dx, dy, width, height) relative to the target's point for pointing steps (it moves
    with the target), or absolute screen pixels for steps without a target. `changed` False: the
    recording saw no change, and none is required at replay.
    """

    changed: bool
    region: tuple[int, int, int, int] | None = None


@dataclass(frozen=True, slots=True)
class RoutineStep:
    number: int
    action: Action  # screen space, as recorded (or as repaired)
    target: Target | None = None
    expect: ExpectedEffect = ExpectedEffect(changed=False)
    text_parameter: str = ""  # a TypeText whose text is this parameter's value
    irreversible: bool = False  # send, save, delete, submit...: always asked at replay
    note: str = ""  # what the model said it was doing, for the person reading the file

    def describe(self, values: Mapping[str, str] | None = None) -> str:
        """The step in words; with `values` (the run's parameters), a parameter's text is the value given."""
        if isinstance(self.action, TypeText) and self.text_parameter:
            enter = " and press Enter" if self.action.press_enter else ""
            if values is not None and self.text_parameter in values:
                return f"type {values[self.text_parameter]!r} (the value of {self.text_parameter}){enter}"
            return f"type the value of {self.text_parameter}{enter}"
        what = self.action.describe()
        if self.target is not None and self.target.element:
            what = f"{self.action.kind} {self.target.element}"
        return what


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    default: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class Routine:
    name: str
    task: str
    steps: tuple[RoutineStep, ...]
    parameters: tuple[Parameter, ...] = ()
    source_session: str = ""
    created: str = ""
    hotkey: str = ""  # pynput syntax; empty: none
    folder: Path | None = None  # where it was loaded from (crops are relative to it)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def parameter(self, name: str) -> Parameter | None:
        return next((p for p in self.parameters if p.name == name), None)


# -- writing -------------------------------------------------------------------------------------


def routine_to_toml(routine: Routine) -> str:
    document: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "name": routine.name,
        "task": routine.task,
        "source_session": routine.source_session,
        "created": routine.created,
        **({"hotkey": routine.hotkey} if routine.hotkey else {}),
        "parameters": [
            {"name": p.name, "default": p.default, "description": p.description} for p in routine.parameters
        ],
        "steps": [_step_to_dict(step) for step in routine.steps],
    }
    return tomli_w.dumps(document, multiline_strings=True)


def _step_to_dict(step: RoutineStep) -> dict[str, Any]:
    out: dict[str, Any] = {"number": step.number}
    if step.note:
        out["note"] = step.note
    out["irreversible"] = step.irreversible
    if step.text_parameter:
        out["text_parameter"] = step.text_parameter
    out["action"] = {key: value for key, value in step.action.to_dict().items() if value is not None}
    if step.target is not None:
        target = step.target
        out["target"] = {
            "element": target.element,
            "point": list(target.point),
            "crop": target.crop,
            "crop_offset": list(target.crop_offset),
            "context": target.context,
            "context_offset": list(target.context_offset),
            "nearby_text": list(target.nearby_text),
            "accessibility_path": target.accessibility_path,
        }
    expect: dict[str, Any] = {"changed": step.expect.changed}
    if step.expect.region is not None:
        expect["region"] = list(step.expect.region)
    out["expect"] = expect
    return out


def write_routine(routine: Routine, folder: Path) -> Path:
    """Write `routine.toml` into `folder` atomically (temp file, fsync, rename); returns its path.

    The folder is 0700 and the file 0600, like a session's: it holds what was typed."""
    private_folder(folder)
    path = folder / ROUTINE_FILE
    write_private(path, routine_to_toml(routine).encode("utf-8"))
    return path


# -- reading -------------------------------------------------------------------------------------


class _Problems:
    """Collects problems with where they are; `get` reads a field and checks its type."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def add(self, where: str, problem: str) -> None:
        self.found.append(f"{where}: {problem}")

    def text(self, table: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
        value = table.get(key)
        if value is None:
            if required:
                self.add(f"{where}{key}", "missing (expected text)")
            return ""
        if not isinstance(value, str):
            self.add(f"{where}{key}", f"expected text, got {value!r}")
            return ""
        return value

    def pair(self, table: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> tuple[int, int]:
        value = table.get(key)
        if value is None and not required:
            return (0, 0)
        if not isinstance(value, list) or not _whole_numbers(value, 2):
            self.add(f"{where}{key}", f"expected [x, y] (two whole numbers), got {value!r}")
            return (0, 0)
        return (int(value[0]), int(value[1]))


def _whole_numbers(value: object, count: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) == count
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    )


def load_routine(folder: Path) -> Routine:
    """Read `folder/routine.toml`; RoutineFileError lists every problem (FileNotFoundError if absent)."""
    path = folder / ROUTINE_FILE
    raw = path.read_bytes()
    make_private(folder)  # one saved before routines were private (0755/0644) is private from now on
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RoutineFileError(path, [f"not readable TOML: {_in_words(str(exc))}"]) from None
    return routine_from_document(document, folder, path)


# tomllib names a bad character by its repr ("Illegal character '\\n'"); shown as it is, the tray's menu read '\\n'.
_CHARACTER_WORDS = {"'\\n'": "a line break", "'\\r'": "a carriage return", "'\\t'": "a tab"}


def _in_words(message: str) -> str:
    """tomllib's message with the characters it names by their escapes named in words."""
    for escaped, words in _CHARACTER_WORDS.items():
        message = message.replace(f"Illegal character {escaped}", f"{words} where TOML allows none")
    return message


def routine_from_document(document: Mapping[str, Any], folder: Path, path: Path) -> Routine:
    problems = _Problems()
    if document.get("format") != FORMAT_NAME:
        problems.add("format", f"expected {FORMAT_NAME!r}, got {document.get('format')!r}")
    version = document.get("version")
    if version != FORMAT_VERSION:
        problems.add("version", f"this Holodesk reads version {FORMAT_VERSION}, the file says {version!r}")
    name = problems.text(document, "name", "")
    if name:
        try:
            check_name(name)
        except ValueError as exc:
            problems.add("name", str(exc))
    task = problems.text(document, "task", "")
    hotkey = problems.text(document, "hotkey", "", required=False)
    if hotkey:
        try:
            check_hotkey(hotkey)
        except HotkeySyntaxError as exc:
            problems.add("hotkey", str(exc))
    parameters = _parameters(document.get("parameters", []), problems)
    known = {p.name for p in parameters}
    raw_steps = document.get("steps")
    steps: list[RoutineStep] = []
    if not isinstance(raw_steps, list) or not raw_steps:
        problems.add("steps", "a routine needs at least one [[steps]] table")
    else:
        for index, raw in enumerate(raw_steps, start=1):
            step = _step(raw, f"steps[{index}].", problems, known, folder)
            if step is not None:
                steps.append(step)
    if problems.found:
        raise RoutineFileError(path, problems.found)
    return Routine(
        name=name,
        task=task,
        steps=tuple(steps),
        parameters=tuple(parameters),
        source_session=problems.text(document, "source_session", "", required=False),
        created=problems.text(document, "created", "", required=False),
        hotkey=hotkey,
        folder=folder,
    )


def _parameters(raw: object, problems: _Problems) -> list[Parameter]:
    if not isinstance(raw, list):
        problems.add("parameters", f"expected a list of [[parameters]] tables, got {raw!r}")
        return []
    out: list[Parameter] = []
    for index, table in enumerate(raw, start=1):
        where = f"parameters[{index}]."
        if not isinstance(table, dict):
            problems.add(f"parameters[{index}]", "expected a table")
            continue
        name = problems.text(table, "name", where)
        if name and not PARAMETER_PATTERN.match(name):
            problems.add(f"{where}name", f"lower-case letters, digits and '_', starting with a letter; got {name!r}")
        if name in {p.name for p in out}:
            problems.add(f"{where}name", f"{name!r} is named twice")
        out.append(
            Parameter(
                name, problems.text(table, "default", where), problems.text(table, "description", where, required=False)
            )
        )
    return out


def _step(raw: object, where: str, problems: _Problems, parameters: set[str], folder: Path) -> RoutineStep | None:
    if not isinstance(raw, dict):
        problems.add(where.rstrip("."), "expected a table")
        return None
    before = len(problems.found)
    number = raw.get("number")
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        problems.add(f"{where}number", f"expected a whole number from 1, got {number!r}")
        number = 0
    action: Action | None = None
    raw_action = raw.get("action")
    try:
        if not isinstance(raw_action, dict):
            raise ActionError(f"expected an action table, got {raw_action!r}")
        action = action_from_dict(raw_action)
        if action.kind in ("done", "ask_user", "plan"):
            raise ActionError(f"a routine step acts on the desktop; {action.kind!r} does not")
    except ActionError as exc:
        problems.add(f"{where}action", str(exc))
    irreversible = raw.get("irreversible", False)
    if not isinstance(irreversible, bool):
        problems.add(f"{where}irreversible", f"expected true or false, got {irreversible!r}")
    text_parameter = problems.text(raw, "text_parameter", where, required=False)
    if text_parameter:
        if text_parameter not in parameters:
            problems.add(f"{where}text_parameter", f"no [[parameters]] table is named {text_parameter!r}")
        if action is not None and not isinstance(action, TypeText):
            problems.add(f"{where}text_parameter", f"only a typing step has one; this step is a {action.kind}")
    target = _target(raw.get("target"), f"{where}target.", problems, folder)
    if target is None and action is not None and raw.get("target") is None and action.kind in ("click", "drag"):
        problems.add(f"{where}target", f"a {action.kind} step needs a [steps.target] table")
    expect = _expect(raw.get("expect", {"changed": False}), f"{where}expect.", problems)
    if len(problems.found) != before or action is None:
        return None
    return RoutineStep(
        number=number,
        action=action,
        target=target,
        expect=expect,
        text_parameter=text_parameter,
        irreversible=bool(irreversible),
        note=problems.text(raw, "note", where, required=False),
    )


def _target(raw: object, where: str, problems: _Problems, folder: Path) -> Target | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.add(where.rstrip("."), "expected a table")
        return None
    crop = problems.text(raw, "crop", where)
    for key in ("crop", "context"):
        relative = problems.text(raw, key, where, required=False)
        if relative and (Path(relative).is_absolute() or ".." in Path(relative).parts):
            problems.add(f"{where}{key}", f"must be a path inside the routine's folder, got {relative!r}")
        elif relative:
            why = check_picture(folder, relative)  # a PNG file of its own, whole: checked before any step runs
            if why:
                problems.add(f"{where}{key}", why)
    nearby = raw.get("nearby_text", [])
    if not isinstance(nearby, list) or not all(isinstance(t, str) for t in nearby):
        problems.add(f"{where}nearby_text", f"expected a list of texts, got {nearby!r}")
        nearby = []
    return Target(
        point=problems.pair(raw, "point", where),
        crop=crop,
        crop_offset=problems.pair(raw, "crop_offset", where),
        context=problems.text(raw, "context", where, required=False),
        context_offset=problems.pair(raw, "context_offset", where, required=False),
        element=problems.text(raw, "element", where, required=False),
        nearby_text=tuple(nearby),
        accessibility_path=problems.text(raw, "accessibility_path", where, required=False),
    )


def _expect(raw: object, where: str, problems: _Problems) -> ExpectedEffect:
    if not isinstance(raw, dict):
        problems.add(where.rstrip("."), "expected a table")
        return ExpectedEffect(False)
    changed = raw.get("changed")
    if not isinstance(changed, bool):
        problems.add(f"{where}changed", f"expected true or false, got {changed!r}")
        changed = False
    region = raw.get("region")
    if region is None:
        return ExpectedEffect(changed)
    if not _whole_numbers(region, 4) or region[2] <= 0 or region[3] <= 0:
        problems.add(
            f"{where}region", f"expected [dx, dy, width, height] (whole numbers, sizes above 0), got {region!r}"
        )
        return ExpectedEffect(changed)
    return ExpectedEffect(changed, (region[0], region[1], region[2], region[3]))


# -- the routines folder ---------------------------------------------------------------------------


def default_routines_root() -> Path:
    """The platform's user data folder for routines (beside the sessions)."""
    from platformdirs import user_data_path

    return user_data_path("holodesk", appauthor=False) / "routines"


def routine_folders(root: Path) -> list[Path]:
    """Routine folders under `root`, by name."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / ROUTINE_FILE).is_file())
