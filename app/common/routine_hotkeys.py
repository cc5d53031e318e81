"""Which routines' hotkeys the tray app may bind, and why each of the others is refused, in words.

A routine's hotkey (`hotkey` in its routine.toml) is refused when it is the app's prompt hotkey,
when it holds the stop key (pressing it would count towards the stop gesture), or when another
routine has the same keys: both are refused then, since a press could not say which one to run.
Keys are compared as sets ("<alt>+<ctrl>+1" is "<ctrl>+<alt>+1"). No Qt here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from holodesk.app.common.session_words import hotkey_in_words
from holodesk.automation.hotkey_syntax import HotkeySyntaxError, hotkey_keys, key_part
from holodesk.automation.routines.routine_file import Routine, load_routine, routine_folders


@dataclass(frozen=True, slots=True)
class RoutineHotkeys:
    """`bound`: hotkey (as written) -> routine name; `refused`: routine name -> why its hotkey is not bound."""

    bound: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)

    def hotkey_of(self, name: str) -> str | None:
        return next((hotkey for hotkey, routine in self.bound.items() if routine == name), None)


def plan_routine_hotkeys(routines: Sequence[Routine], prompt_hotkey: str, stop_key: str) -> RoutineHotkeys:
    """Bind each routine's hotkey unless it clashes with the app's keys or another routine's."""
    prompt_keys = hotkey_keys(prompt_hotkey)
    try:
        stop, _ = key_part(stop_key)
    except HotkeySyntaxError:
        stop = ""
    by_keys: dict[frozenset[str], list[Routine]] = {}
    for routine in routines:
        if routine.hotkey:
            by_keys.setdefault(hotkey_keys(routine.hotkey), []).append(routine)
    bound: dict[str, str] = {}
    refused: dict[str, str] = {}
    for keys, sharing in by_keys.items():
        for routine in sharing:
            words = hotkey_in_words(routine.hotkey)
            others = [other.name for other in sharing if other is not routine]
            if keys == prompt_keys:
                refused[routine.name] = f"{words} is Holodesk's own hotkey for the task prompt; pick other keys"
            elif stop and stop in keys:
                refused[routine.name] = (
                    f"{words} holds the stop key {hotkey_in_words(stop_key)}; pressing it would count towards"
                    " stopping a run"
                )
            elif others:
                refused[routine.name] = (
                    f"{words} is also the hotkey of the routine {', '.join(repr(o) for o in others)}; neither is bound"
                    " until one changes"
                )
            else:
                bound[routine.hotkey] = routine.name
    return RoutineHotkeys(bound, refused)


def readable_routines(root: Path) -> list[Routine]:
    """The routines under `root` that load (the Routines menu says why the others do not)."""
    routines = []
    for folder in routine_folders(root):
        try:
            routines.append(load_routine(folder))
        except Exception:  # whatever breaks one routine (the Routines menu says what): the others keep their keys
            continue
    return routines
