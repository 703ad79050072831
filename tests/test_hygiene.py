"""The codebase's own rules (docs/architecture.md): modules import downwards with no
circles, no module imports another's private names, and a module past about 800 lines
says in its opening comment why it is one."""

from __future__ import annotations

import ast
from pathlib import Path

from xcep.kernels import KERNELS

SRC = Path(__file__).resolve().parent.parent / "src" / "xcep"
LONGEST = 800


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """module -> the xcep modules it imports (anywhere in it, functions included)."""
    modules = {_module(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                base = node.module
                for alias in node.names:  # from xcep.x import y: y may be a module
                    candidate = f"{base}.{alias.name}"
                    found.add(candidate if candidate in modules else base)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    graph = _imports()
    assert len(graph) > 50  # the walk found the package
    # a package's __init__ re-exports its modules, which import each other through it:
    # only circles between modules that are not a package and its own parts count
    circles = [c for c in _circles(graph) if not all(m.startswith(min(c, key=len)) for m in c)]
    assert circles == []


def test_a_long_module_says_why_it_is_one():
    long = {}
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        if text.count("\n") > LONGEST:
            doc = ast.get_docstring(ast.parse(text)) or ""
            long[str(path.relative_to(SRC))] = "on purpose" in doc
    assert long  # (the rule is looked at: some modules are long)
    assert all(long.values()), [name for name, ok in long.items() if not ok]


def test_nothing_private_is_imported_from_another_module():
    compiled = {module.rsplit(".", 1)[1] for module in KERNELS}  # the C extensions
    crossing = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("xcep")):
                continue
            names = node.module.split(".")[1:] + [alias.name for alias in node.names]
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if any(n not in compiled for n in private):
                crossing.append(f"{path.relative_to(SRC)}: from {node.module} import ...")
    assert crossing == []


ENGINE_PACKAGES = ("xcep.xpush", "xcep.xseq", "xcep.xscl", "xcep.xquery", "xcep.testing")
ENGINES = {"XPushMachine", "XSeqEngine", "XSeqMultiEngine", "XsclEngine", "XQuery", "compile"}


def test_only_plans_make_engines():
    """The front ends (commands, Spark, the service) run the engines through
    ``xcep.plans`` only: no module outside the engines' packages and ``plans.py``
    constructs an engine or compiles an XQuery (``xquery.compile``)."""
    makers = []
    for path in SRC.rglob("*.py"):
        module = _module(path)
        if module.startswith(("xcep.plans", *ENGINE_PACKAGES)):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            owner = (
                func.value.id
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                else None
            )
            if name in ENGINES - {"compile"} or (name == "compile" and owner == "xquery"):
                makers.append(f"{module}:{node.lineno} {name}")
    assert not makers, makers
