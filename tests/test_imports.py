"""The project's imports: no import cycles, and every function-local project import says why (issue 47).

Every product module (app/, automation/, inference/, and bench/) is parsed with `ast`, never imported,
so the check is fast and needs no display, Qt or torch. The import graph is built from the imports a
module runs when it is imported (module level, class bodies, module-level `if`/`try`; not the
`if TYPE_CHECKING:` blocks, which never run). A cycle in it is a pair of modules that each need the
other half-imported. A project import inside a function hides such a cycle, or the module's real
weight, from the reader, so each one must carry a short reason comment on its line or the line above
(one comment above a run of adjacent import lines covers the run): heavy and optional (torch,
transformers, Qt in the CLI) or a start-up path that bench/startup.py measures.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Folder -> the name it is installed under. bench/ is also importable as plain `bench` (the tests and
# the bench scripts use that name); both spellings are one module.
PACKAGES = {
    "app": "holodesk.app",
    "automation": "holodesk.automation",
    "inference": "holodesk.inference",
    "bench": "holodesk.bench",
}
ALIASES = {"bench": "holodesk.bench"}
# Comments that are tool pragmas, not reasons.
PRAGMA = re.compile(r"#\s*(noqa(:\s*[A-Z]+[0-9]+(,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(\[[^\]]*\])?|pragma:\s*no cover)")


@dataclass(frozen=True)
class LocalImport:
    """A project import inside a function body."""

    path: Path
    line: int
    target: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.target}"


def module_files() -> dict[str, Path]:
    """Every product module by its dotted name under `holodesk.`."""
    found: dict[str, Path] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def canonical(name: str) -> str:
    """`bench.harness` -> `holodesk.bench.harness`; other names unchanged."""
    head, _, rest = name.partition(".")
    if head in ALIASES:
        return ALIASES[head] + ("." + rest if rest else "")
    return name


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imported_modules(node: ast.Import | ast.ImportFrom, module: str, path: Path, known: set[str]) -> list[str]:
    """The project modules an import statement loads (`from pkg import sub` names the submodule)."""
    if isinstance(node, ast.Import):
        names = [canonical(alias.name) for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package(path) else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = canonical(node.module or "")
        names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source for alias in node.names]
    targets = []
    for name in names:
        # `import holodesk.app.cli.doctor` loads the deepest project module the name reaches.
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name not in targets:
            targets.append(name)
    return targets


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def walk_imports(body: list[ast.stmt], in_function: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement with whether it runs inside a function (TYPE_CHECKING blocks left out)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from walk_imports(node.body, True)
        elif isinstance(node, ast.If) and is_type_checking(node):
            yield from walk_imports(node.orelse, in_function)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    blocks = [
                        child.body if isinstance(child, (ast.ExceptHandler, ast.match_case)) else [child]
                        for child in children
                    ]
                    for block in blocks:
                        yield from walk_imports([b for b in block if isinstance(b, ast.stmt)], in_function)


def comments_by_line(source: str) -> dict[int, str]:
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string
    return found


def is_reason(comment: str | None) -> bool:
    """A comment that says something beyond tool pragmas (at least two words of its own)."""
    if comment is None:
        return False
    # "# type: ignore[x]  # heavy: torch" keeps its second part; "# type: ignore[x]" alone is no reason.
    text = PRAGMA.sub(" ", comment).replace("#", " ")
    return len(text.split()) >= 2


@dataclass
class Survey:
    graph: dict[str, set[str]]
    unexplained: list[LocalImport]


def survey() -> Survey:
    files = module_files()
    known = set(files)
    graph: dict[str, set[str]] = {name: set() for name in files}
    unexplained = []
    for module, path in files.items():
        source = path.read_text()
        tree = ast.parse(source, filename=str(path))
        comments = comments_by_line(source)
        # A reason above a run of imports (one statement right after another) explains the whole run.
        explained_until = 0
        for node, in_function in walk_imports(tree.body, False):
            end = node.end_lineno or node.lineno
            reason = any(is_reason(comments.get(line)) for line in (node.lineno - 1, node.lineno, end))
            if reason or (in_function and explained_until == node.lineno - 1):
                explained_until = end
            targets = [t for t in imported_modules(node, module, path, known) if t != module]
            if not targets:
                continue
            if not in_function:
                graph[module].update(targets)
            elif explained_until != end:
                unexplained.append(LocalImport(path, node.lineno, ", ".join(targets)))
    return Survey(graph, unexplained)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a deep graph cannot reach the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(found)


def test_the_checker_finds_a_cycle_and_an_unexplained_local_import() -> None:
    # The checker's own parts on a made-up graph and comments: it can fail.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert not is_reason("# noqa: PLC0415")
    assert not is_reason("# type: ignore[attr-defined]")
    assert is_reason("# noqa: PLC0415  # heavy: torch")
    assert is_reason("# heavy: torch")


def test_no_import_cycles() -> None:
    found = cycles(survey().graph)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(component) for component in found)


def test_every_function_local_project_import_says_why() -> None:
    unexplained = survey().unexplained
    assert not unexplained, (
        f"{len(unexplained)} function-local project imports without a reason comment "
        "(on the line or the line above; or hoist them to the top):\n" + "\n".join(map(str, unexplained))
    )
