"""Every exception class the app defines derives from its one root, HolodeskAppError.

The walk imports every module under holodesk.app (not the `__main__` entry points, which start the
program) and collects each BaseException subclass defined there, so a new error class that forgets the
root fails here by name. A caller can then catch the app's refusals with one clause.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import holodesk.app
from holodesk.app.common.errors import HolodeskAppError

# Classes left off the root on purpose, each with why. The test also fails when one of them joins the
# root or goes away, so the list cannot go stale. None today: every app error joined without changing
# which handler takes it (a builtin second base stays where callers catch the builtin).
EXEMPT: dict[str, str] = {}


def app_exceptions() -> dict[str, type[BaseException]]:
    """Every BaseException subclass defined in a module of holodesk.app, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    prefix = holodesk.app.__name__ + "."
    for module_info in pkgutil.walk_packages(holodesk.app.__path__, prefix):
        if module_info.name.rpartition(".")[2] == "__main__":
            continue  # importing it runs the program
        module = importlib.import_module(module_info.name)  # a module that cannot import fails the test
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_the_walk_finds_errors_in_every_app_package() -> None:
    """The walk reaches subpackages: it is not vacuously passing on an empty or partial list."""
    names = set(app_exceptions())
    for expected in (
        "holodesk.app.common.errors.HolodeskAppError",
        "holodesk.app.common.settings_model.SettingsError",
        "holodesk.app.gui.hotkeys.HotkeyError",
        "holodesk.app.eval.workers.EpisodeError",
        "holodesk.app.setup.errors.SetupError",
        "holodesk.app.mcp.act_arguments.BadToolInput",
    ):
        assert expected in names


def test_every_app_error_derives_from_holodesk_app_error() -> None:
    found = app_exceptions()
    offenders = sorted(
        f"{name} ({', '.join(base.__name__ for base in cls.__bases__)})"
        for name, cls in found.items()
        if not issubclass(cls, HolodeskAppError) and name not in EXEMPT
    )
    assert not offenders, "not under HolodeskAppError:\n  " + "\n  ".join(offenders)


def test_the_exemptions_are_still_needed() -> None:
    found = app_exceptions()
    gone = sorted(name for name in EXEMPT if name not in found)
    joined = sorted(name for name in EXEMPT if name in found and issubclass(found[name], HolodeskAppError))
    assert not gone, f"exempt but no longer defined (drop them from EXEMPT): {gone}"
    assert not joined, f"exempt but now under HolodeskAppError (drop them from EXEMPT): {joined}"
