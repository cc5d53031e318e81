"""Every broad exception handler in product code says on its line why it must be that broad.

A handler is broad when it catches Exception or BaseException (alone or in a tuple) or is a bare
`except:`. Such a handler takes bugs along with the failures it was written for, so each one either
narrows to what can really arise there or carries a `#` comment on its `except` line (or the lines of
its clause, when the clause wraps) saying why. The check parses the source with `ast` and reads the
comments with `tokenize`, so a `#` inside a string does not count as a reason.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Product code: what a user runs. tests/ and bench/ are tools around it.
PRODUCT = ("app", "automation", "inference")
BROAD = {"Exception", "BaseException"}


def _is_broad(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    # `builtins.Exception` is not written anywhere here; plain names are what a reader sees.
    return any(isinstance(node, ast.Name) and node.id in BROAD for node in caught)


def _commented_lines(source: str) -> set[int]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {token.start[0] for token in tokens if token.type == tokenize.COMMENT and token.string.strip("# ")}


def broad_handlers_without_reason(source: str, name: str) -> list[str]:
    """`name:line` of each broad handler in `source` with no reason comment on its clause's lines."""
    tree = ast.parse(source, filename=name)
    commented = _commented_lines(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and _is_broad(node):
            last = node.type.end_lineno if node.type is not None and node.type.end_lineno else node.lineno
            # The clause's header ends on the line of its colon: the caught type's last line, or one
            # more when ` as name:` or a closing parenthesis wraps onto the next.
            header = range(node.lineno, min(last + 1, node.body[0].lineno - 1) + 1)
            if not commented.intersection(header):
                found.append(f"{name}:{node.lineno}")
    return found


def product_files() -> list[Path]:
    return sorted(path for package in PRODUCT for path in (ROOT / package).rglob("*.py"))


def test_the_check_sees_broad_handlers_and_reasons() -> None:
    """The check itself: it is not vacuously passing on code it cannot read."""
    source = (
        "try:\n    pass\nexcept Exception:\n    pass\n"
        "try:\n    pass\nexcept (OSError, BaseException) as exc:\n    pass\n"
        "try:\n    pass\nexcept:\n    pass\n"
        "try:\n    pass\nexcept Exception:  # a plugin may raise anything\n    pass\n"
        "try:\n    pass\nexcept (\n    OSError,\n    Exception,\n):  # wrapped clause, reason at its end\n    pass\n"
        "try:\n    pass\nexcept ValueError:\n    pass\n"
        'try:\n    pass\nexcept Exception:\n    x = "# not a comment"\n'
    )
    assert broad_handlers_without_reason(source, "m.py") == ["m.py:3", "m.py:7", "m.py:11", "m.py:30"]


def test_the_walk_reaches_every_product_package() -> None:
    files = product_files()
    for package in PRODUCT:
        assert any(path.parts[len(ROOT.parts)] == package for path in files), package
    assert ROOT / "automation" / "engine.py" in files


def test_every_broad_handler_in_product_code_says_why() -> None:
    missing = [
        place
        for path in product_files()
        for place in broad_handlers_without_reason(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert not missing, (
        "broad handlers (Exception, BaseException, bare except) with no reason on their line; "
        "narrow them or say why they must be broad:\n  " + "\n  ".join(missing)
    )
