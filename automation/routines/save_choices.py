"""What the user decided when saving a routine: its name, each proposed parameter, the steps kept.

The terminal (`holodesk routine save`) and the tray's save dialog ask the same questions; this
applies the answers to a compiled routine. A parameter may be kept, renamed, or made literal (the
recorded text is typed as it was); a step may be left out (it is then also gone from the
parameters it alone used). Anything that cannot be honoured is a `SaveChoiceError` in words,
before anything is written.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from holodesk.automation.errors import AutomationError
from holodesk.automation.routines.compiler import CompiledRoutine
from holodesk.automation.routines.routine_file import PARAMETER_PATTERN, check_name


class ParameterUse(StrEnum):
    KEEP = "keep"
    RENAME = "rename"
    LITERAL = "literal"  # the recorded text is typed as it was: no parameter


@dataclass(frozen=True, slots=True)
class ParameterChoice:
    use: ParameterUse
    new_name: str = ""  # for RENAME


class SaveChoiceError(AutomationError):
    """A choice that cannot be applied (a bad name, two parameters with one name, no step left)."""


def apply_choices(
    compiled: CompiledRoutine,
    name: str,
    parameters: Mapping[str, ParameterChoice],
    left_out_steps: Collection[int] = (),
) -> CompiledRoutine:
    """`compiled` renamed to `name`, its parameters as chosen (absent: kept), without `left_out_steps`."""
    try:
        check_name(name)
    except ValueError as exc:
        raise SaveChoiceError(str(exc)) from None
    routine = compiled.routine
    kept_steps = [s for s in routine.steps if s.number not in left_out_steps]
    if not kept_steps:
        raise SaveChoiceError("every step is left out: keep at least one")
    renamed: dict[str, str] = {}
    new_parameters = []
    for parameter in routine.parameters:
        choice = parameters.get(parameter.name, ParameterChoice(ParameterUse.KEEP))
        if choice.use is ParameterUse.LITERAL:
            continue
        new_name = parameter.name
        if choice.use is ParameterUse.RENAME:
            new_name = choice.new_name.strip()
            if not PARAMETER_PATTERN.match(new_name):
                raise SaveChoiceError(
                    f"{new_name!r} cannot name a parameter: lower-case letters, digits and _, starting with a letter"
                )
        if new_name in renamed.values():
            raise SaveChoiceError(f"two parameters would be called {new_name!r}")
        renamed[parameter.name] = new_name
        new_parameters.append(replace(parameter, name=new_name))
    steps = []
    for number, step in enumerate(kept_steps, start=1):
        uses = renamed.get(step.text_parameter, "") if step.text_parameter else ""
        steps.append(replace(step, number=number, text_parameter=uses))
    used = {s.text_parameter for s in steps if s.text_parameter}
    new_parameters = [p for p in new_parameters if p.name in used]
    left_out = list(compiled.left_out)
    left_out += [f"{s.describe()}: left out by you when saving" for s in routine.steps if s.number in left_out_steps]
    return CompiledRoutine(
        replace(routine, name=name, parameters=tuple(new_parameters), steps=tuple(steps)),
        dict(compiled.pictures),
        left_out,
    )
