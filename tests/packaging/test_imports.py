"""Code, tests and benchmarks import Holodesk as a user's install does: through `holodesk.`, never a bare folder name.

The repository root is on sys.path for `tests` and `bench`, so `import app` would work here and
nowhere else; this keeps such an import from slipping in.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BARE = ("app", "automation", "inference", "assets")
SOURCES = sorted(
    path for folder in ("app", "automation", "inference", "bench", "tests") for path in (REPO / folder).rglob("*.py")
)


def _imported_names(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_bare_package_imports(path: Path) -> None:
    names = _imported_names(ast.parse(path.read_text(encoding="utf-8")))
    bare = [name for name in names if name.split(".")[0] in BARE]
    assert not bare, f"{path.relative_to(REPO)} imports {bare}: use holodesk.<package>"


def test_importing_anything_outside_the_gui_loads_no_qt() -> None:
    """Every module outside holodesk.app.gui imports without Qt (the CLI starts the GUI lazily, on demand)."""
    modules = [
        "holodesk." + path.relative_to(REPO).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
        for folder in ("app", "automation", "inference")
        for path in (REPO / folder).rglob("*.py")
        if not path.relative_to(REPO).as_posix().startswith("app/gui/") and path.name != "__main__.py"
    ]
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('PySide6', 'holodesk.app.gui'))))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"Qt loaded by a non-GUI module: {result.stdout}"


def test_the_in_process_engine_loads_without_the_remote_backend() -> None:
    """The local backend and every engine module import without the HTTP client, the keyring or `remote`.

    A GPU machine runs the engine with only torch and transformers beside it; an import that reaches
    the remote backend pulls httpx and keyring in, and the engine fails to load there.
    """
    script = (
        "import importlib, pkgutil, sys\n"
        "import holodesk.inference.engine as engine\n"
        "names = ['holodesk.inference.local'] + [f'holodesk.inference.engine.{m.name}'"
        " for m in pkgutil.iter_modules(engine.__path__)]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules"
        " if m.startswith(('holodesk.inference.remote', 'holodesk.inference.secrets', 'httpx', 'keyring'))"
        " and '.' not in m.removeprefix('holodesk.inference.')))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"the engine loads parts of the remote backend: {result.stdout}"
