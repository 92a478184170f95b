"""The project's shape, read from its source with ``ast``: no import cycle anywhere
(imports inside functions count: a lazy import that closes a loop is still a loop), and
the layers run one way — attn ← room ← ui ← pages / app / harness: the engine knows no
room, what serves the room draws nothing, and nothing imports a page."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYERS = ("attn", "room", "ui", "harness")  # each may import those before it, never after


def project_modules() -> dict[str, pathlib.Path]:
    out = {f"{pkg}.{p.stem}": p for pkg in LAYERS for p in (ROOT / pkg).glob("*.py") if p.stem != "__init__"}
    out |= {f"pages.{p.stem}": p for p in (ROOT / "pages").glob("*.py")}
    out["app"] = ROOT / "app.py"
    return out


MODULES = project_modules()


def imports_of(name: str) -> set[str]:
    """The project modules ``name`` imports, wherever the import stands (top, function,
    block), as ``package.module``."""
    pkg = name.split(".")[0]
    out = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                here = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
                found = [f"{pkg}.{m}" for m in here]
            else:
                found = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            found = [a.name for a in node.names]
        else:
            continue
        out |= {m for m in found if m in MODULES}
    out.discard(name)
    return out


GRAPH = {m: imports_of(m) for m in MODULES}


def test_the_reader_of_imports_sees_every_kind_of_import():
    """The graph the other tests read, checked on imports written each way."""
    assert "room.backend" in GRAPH["room.pgstore"]  # from .backend import …
    assert "room.pgstore" in GRAPH["room.store"]  # from . import pgstore
    assert "ui.live" in GRAPH["ui.summary"]  # inside a function
    assert "attn.model" in GRAPH["ui.state"]  # from attn import model as …
    assert "ui.steps" in GRAPH["app"]


def test_no_import_cycle_anywhere_in_the_project():
    cycles, done = [], set()

    def visit(m, path):
        for n in sorted(GRAPH[m]):
            if n in path:
                cycles.append(path[path.index(n):] + [n])
            elif n not in done:
                visit(n, path + [n])
        done.add(m)

    for m in sorted(MODULES):
        if m not in done:
            visit(m, [m])
    assert not cycles, cycles[:5]


def test_the_layers_import_one_way_and_nothing_imports_a_page():
    rank = {pkg: i for i, pkg in enumerate(LAYERS)}
    upward = [(m, n) for m, deps in GRAPH.items() for n in deps
              if m.split(".")[0] in rank and rank[n.split(".")[0]] > rank[m.split(".")[0]]]
    assert not upward, upward
    assert not [(m, n) for m, deps in GRAPH.items() for n in deps if n.startswith("pages.") or n == "app"]
    assert not [m for m in GRAPH if m.startswith("room.") and "streamlit" in MODULES[m].read_text(encoding="utf-8")]
