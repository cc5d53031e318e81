"""The engine benchmark's reference child: REFERENCE_COMMIT's step engine in a process of its own.

`python -m bench.engine_reference_child FOLDER` (started by bench.engine_reference.ReferenceEngine)
makes every `holodesk` import come from FOLDER, then answers each "run" line on its stdin with one
JSON line, the milliseconds per part of each measured step of one engine run. Its own module, apart
from the parent's side, so that bench.engine can import the parent's side at the top while this
child imports bench.engine only once the reference's packages are in place.
"""

from __future__ import annotations

import inspect
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # today's types, for reading; the child holds the reference's classes of the same names
    from holodesk.automation.actions import Action
    from holodesk.automation.cancel import CancelToken
    from holodesk.automation.input.performer import ExecutionResult
    from holodesk.automation.screen import ScreenCapture


def only_the_reference_holodesk(folder: Path) -> None:
    """Make every `holodesk.*` import in this process come from `folder`, or fail.

    The editable install's finder maps each of today's package folders (holodesk.automation.input,
    holodesk.inference.engine, ...) by name: a module the reference lacks would otherwise load from
    today's tree on top of the reference's (today's input layer asking the reference's errors module
    for DesktopRefused). Without the finder, a missing module is an ImportError naming it.
    """
    sys.meta_path[:] = [finder for finder in sys.meta_path if not _is_editable_finder(finder)]
    sys.path_hooks[:] = [hook for hook in sys.path_hooks if not _is_editable_finder(hook)]
    sys.path_importer_cache.clear()
    sys.path.insert(0, str(folder))


def _is_editable_finder(finder: object) -> bool:
    module = inspect.getmodule(finder)  # the finder class, or the module of its path hook's method
    return module is not None and module.__name__.startswith("__editable__")


class ReferencePerformer:
    """The reference's own input layer (automation.executor.Executor) behind the bench's StepInput."""

    def __init__(self, capture: ScreenCapture) -> None:
        from holodesk.automation.executor import Executor  # REFERENCE_COMMIT's; gone since the input split

        self._executor = Executor(capture=capture)

    def validate(self, action: Action) -> None:
        self._executor.validate(action)

    def execute(self, action: Action, cancel: CancelToken) -> ExecutionResult:
        return self._executor.execute(action, cancel)

    def close(self) -> None:
        """The reference's engine never calls it (its Executor had nothing to give back)."""


def serve(folder: Path) -> None:
    """The child's loop: import the reference's holodesk, then one engine run per "run" line."""
    only_the_reference_holodesk(folder)
    # Imported only now, and never at the top: imported before the line above, it is today's engine.
    import holodesk.automation.engine

    engine_file = Path(holodesk.automation.engine.__file__).resolve()
    if not engine_file.is_relative_to(folder.resolve()):
        raise RuntimeError(f"the reference's holodesk did not load (got {engine_file})")
    # Imported only now, so that its holodesk imports are the reference's.
    from bench.engine import StepParts, run_engine
    from holodesk.automation.screen import ScreenCapture

    capture = ScreenCapture()
    performer = ReferencePerformer(capture)
    with tempfile.TemporaryDirectory(prefix="holodesk-bench-") as sessions:
        for line in sys.stdin:
            if line.strip() != "run":
                continue
            parts = StepParts()
            try:
                run_engine(capture, performer, Path(sessions), parts)
                answer: dict[str, Any] = {"parts": parts.parts}
            except Exception as exc:  # the parent says it in words and skips the reference
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(answer), flush=True)
    capture.close()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
