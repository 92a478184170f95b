"""The project's shape, read from its source with ``ast``: no import cycle anywhere
(imports inside functions count: a lazy import that closes a loop is still a loop), and
the layers run one way — attn ← server ← ui ← pages ← app / launch / harness: the engine
knows no room, nothing in ui/ names a page (the walk is what pages/ fills in ui.walk),
what the server shares draws nothing, nothing imports a page file (each step's
``page.py``), and the widgets every page shares import no feature (the live class): a
step's page asks for the class's gate."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYERS = ("attn", "server", "ui", "pages", "harness")  # each may import those before it, never after


def project_modules() -> dict[str, pathlib.Path]:
    """Every module, sub-packages' too, by its dotted name (a package by its own name)."""
    out = {}
    for pkg in LAYERS:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = p.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    out["app"] = ROOT / "app.py"
    out["launch"] = ROOT / "launch.py"
    return out


MODULES = project_modules()


def imports_of(name: str) -> set[str]:
    """The project modules ``name`` imports, wherever the import stands (top, function,
    block), as ``package.module``; ``importlib.import_module("a.b")`` with a written name
    counts as an import too (a name built at run time from ``__name__`` is the module's own
    sub-package)."""
    path = MODULES[name]
    package = name.split(".") if path.stem == "__init__" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1])
                where = f"{base}.{node.module}" if node.module else base
                found = [where] + [f"{where}.{a.name}" for a in node.names]
            else:
                found = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            found = [a.name for a in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found = [node.args[0].value]
        else:
            continue
        out |= {m for m in found if m in MODULES}
    out.discard(name)
    return out


GRAPH = {m: imports_of(m) for m in MODULES}


def test_the_reader_of_imports_sees_every_kind_of_import():
    """The graph the other tests read, checked on imports written each way."""
    assert "server.backend" in GRAPH["server.pgstore"]  # from .backend import …
    assert "server.pgstore" in GRAPH["server.store"]  # from . import pgstore
    assert "ui.analyses" in GRAPH["ui.handout"]  # inside a function
    assert "ui.walk" in GRAPH["pages.every_pair"]  # from ui.walk import page_file (a step's package)
    assert "pages.playground.topk_part" in GRAPH["pages.playground"]  # from . import topk_part
    assert "attn.model" in GRAPH["attn.folders"]  # from .model import …
    assert "attn.loading" in GRAPH["ui.served_model"]  # from attn import budgets, loading
    assert "pages" in GRAPH["app"] and "pages" in GRAPH["launch"]  # launch: inside a function
    assert "ui.classroom.handle" in GRAPH["ui.classroom.votes"]  # from .handle import … (a sub-package)
    assert "ui.share" in GRAPH["ui.classroom.handle"]  # from .. import share


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
    pages = {m for m in MODULES if m.startswith("pages.") and m.endswith(".page")}  # each step's page file
    assert len(pages) >= 9
    assert not [(m, n) for m, deps in GRAPH.items() for n in deps if n in pages or n == "app"]
    assert not [m for m in GRAPH if m.startswith("server.") and "streamlit" in MODULES[m].read_text(encoding="utf-8")]


def test_nothing_in_ui_names_a_page_of_the_walk():
    """ui/ serves every page and names none: no page's id is written in it (the walk is
    what pages/ fills in ui.walk), and no page's package is imported from it."""
    ids = set()
    for init in (ROOT / "pages").glob("*/__init__.py"):
        ids |= {node.value.value for node in ast.walk(ast.parse(init.read_text(encoding="utf-8")))
                if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["ID"]
                and isinstance(node.value, ast.Constant)}
    assert {"every-pair", "closing", "playground"} <= ids and len(ids) >= 9
    named = [(m, node.value) for m, path in MODULES.items() if m.startswith("ui.")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and node.value in ids - {"linear", "hubs"}]
    # "linear" and "hubs" are also a method family and a kernel's argument, not only page ids
    assert not named, named
    assert not [(m, n) for m, deps in GRAPH.items() if m.startswith("ui.") for n in deps if n.startswith("pages")]


def test_no_shared_widget_imports_the_live_class():
    """The class is a feature: the app, a step's page (its gate and its questions) and the
    handout (the teacher's results) ask for it; the modules every page shares do not."""
    askers = {m for m, deps in GRAPH.items() for n in deps if n.startswith("ui.classroom")}
    assert askers - {m for m in MODULES if m.startswith("ui.classroom")} == {"app", "ui.step_page", "ui.handout"}


def test_every_module_the_architecture_doc_names_exists():
    """docs/architecture.md stays true to the tree: every path it names (``ui/walk.py``,
    ``server/texts.Room``…) is a module or a folder, and every engine module its layer
    drawing lists under attn/ is one."""
    import re

    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"\b((?:attn|ui|server|harness|bench|tests)/[\w/]*)", doc))
    missing = [p for p in named if not ((ROOT / f"{p}.py").exists() or (ROOT / p).is_dir()
                                        or (ROOT / p).exists())]
    assert not missing, sorted(missing)
    drawing = doc[doc.index(" attn/ "):doc.index(" harness/ ")]
    engine = re.findall(r"^   (\w+) {2,}", drawing, re.M)
    assert len(engine) >= 20 and not [m for m in engine if not (ROOT / "attn" / f"{m}.py").exists()], engine
    # and every module is named in its own part of the drawing, as a word (not a word's part:
    # "layer" inside "layers" names no attn/layer.py), or by its path anywhere
    room = "   │               classroom/ — "
    parts = {"ui": (" ui/ ", room), "ui/classroom": (room, " server/ "), "server": (" server/ ", " attn/ "),
             "attn": (" attn/ ", " harness/ ")}
    for p, (start, end) in parts.items():
        block = doc[doc.index(start):doc.index(end)]
        for module in (ROOT / p).glob("*.py"):
            if module.stem != "__init__":
                said = re.search(rf"(?<![\w/.]){module.stem}(?![\w/])", block) or f"{p}/{module.stem}" in doc
                assert said, f"docs/architecture.md's drawing names no {p}/{module.name}"
