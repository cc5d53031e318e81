"""Every exception class the automation layer defines derives from its one root, AutomationError.

The walk imports every module under holodesk.automation and collects each BaseException subclass
defined there (not ones it imports), so a new error class that forgets the root fails here by name.
A caller can then catch the automation layer's refusals with one clause and be sure of its words.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import holodesk.automation
from holodesk.automation.errors import AutomationError

# Classes left off the root on purpose, each with why. The test also fails when one of them joins the
# root or goes away, so the list cannot go stale.
EXEMPT = {
    # Control-flow signals: raised and caught inside their own module, never seen by a caller.
    "holodesk.automation.engine._RunEnded": "ends the step loop from inside a step; caught in StepEngine._loop",
    "holodesk.automation.routines.replay._HandOverNow": "hands a replay to the agent; caught in RoutinePolicy.propose",
    "holodesk.automation.input.x11.selection._OwnerChanged": "the owner changed mid-read; caught in _read_previous",
    # Standard-library roots that callers rely on, where joining the root would change which
    # handler takes the error (left to their owners: issue 47 names the routines package).
    "holodesk.automation.pyautogui_import.PyautoguiUnavailable": (
        "an ImportError; under AutomationError, `holodesk run`'s set-up clause would catch it"
    ),
    "holodesk.automation.private_dir.UnsafeRuntimeDirError": (
        "an OSError; under AutomationError, the X11 backend would word it differently while performing"
    ),
    "holodesk.automation.input.x11.xkb.XkbUnavailable": (
        "a RuntimeError; under AutomationError, the X11 backend would turn it into a refused step mid-typing"
    ),
}


def automation_exceptions() -> dict[str, type[BaseException]]:
    """Every BaseException subclass defined in a module of holodesk.automation, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    prefix = holodesk.automation.__name__ + "."
    for module_info in pkgutil.walk_packages(holodesk.automation.__path__, prefix):
        module = importlib.import_module(module_info.name)  # a module that cannot import fails the test
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_the_walk_finds_the_routines_errors() -> None:
    """The walk reaches subpackages: it is not vacuously passing on an empty or partial list."""
    names = set(automation_exceptions())
    for expected in (
        "holodesk.automation.errors.AutomationError",
        "holodesk.automation.routines.compiler.CompileError",
        "holodesk.automation.routines.routine_file.RoutineFileError",
        "holodesk.automation.input.x11.selection.OwnerSilent",
        "holodesk.automation.wayland.portal.ConsentRefused",
    ):
        assert expected in names


def test_every_automation_error_derives_from_automation_error() -> None:
    found = automation_exceptions()
    offenders = sorted(
        f"{name} ({', '.join(base.__name__ for base in cls.__bases__)})"
        for name, cls in found.items()
        if not issubclass(cls, AutomationError) and name not in EXEMPT
    )
    assert not offenders, "not under AutomationError:\n  " + "\n  ".join(offenders)


def test_the_exemptions_are_still_needed() -> None:
    found = automation_exceptions()
    gone = sorted(name for name in EXEMPT if name not in found)
    joined = sorted(name for name in EXEMPT if name in found and issubclass(found[name], AutomationError))
    assert not gone, f"exempt but no longer defined (drop them from EXEMPT): {gone}"
    assert not joined, f"exempt but now under AutomationError (drop them from EXEMPT): {joined}"
