"""The engine's shape, read from its source with ``ast``: its imports run one way (no
module of attn/ imports, directly or through others, one that imports it back), every
import stands at the top of its module (none hides a cycle inside a function), and
each module keeps to its job (the kernels choose nothing, flex only compiles and
calls, the registry is the only way pages reach a kernel)."""

import ast
import pathlib

import pytest

ATTN = pathlib.Path(__file__).resolve().parent.parent / "attn"
MODULES = sorted(p.stem for p in ATTN.glob("*.py") if p.stem != "__init__")


def _tree(name: str) -> ast.Module:
    return ast.parse((ATTN / f"{name}.py").read_text(encoding="utf-8"))


def engine_imports(name: str) -> set[str]:
    """The attn modules ``name`` imports (``from . import x``, ``from .x import y``,
    ``import attn.x``, ``from attn import x``), wherever the import stands."""
    out = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                out.add(node.module.split(".")[0])
            elif node.level == 1 or node.module == "attn":
                out |= {a.name for a in node.names}
            elif node.module and node.module.startswith("attn."):
                out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("attn.")}
    return out & set(MODULES)


def test_the_engines_imports_run_one_way():
    graph = {m: engine_imports(m) for m in MODULES}
    cycles = []

    def visit(m, path):
        for n in sorted(graph[m]):
            if n in path:
                cycles.append(path[path.index(n):] + [n])
            else:
                visit(n, path + [n])

    for m in MODULES:
        visit(m, [m])
    assert not cycles, cycles[:5]


@pytest.mark.parametrize("name", MODULES)
def test_every_import_of_the_engine_stands_at_the_top_of_its_module(name):
    tree = _tree(name)
    top = {id(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    hidden = [n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in top]
    assert not hidden, f"attn/{name}.py imports inside a function or block at lines {hidden}"


def test_each_module_keeps_to_its_job():
    assert engine_imports("kernels") <= {"patterns", "features"}  # pure torch: no dispatch, no compiler
    assert engine_imports("flex") == {"patterns"}  # compiles and calls; the self-check is backend's
    assert engine_imports("composition") == {"patterns"}  # the algebra of parts, over the patterns
    assert {"flex", "kernels"} <= engine_imports("backend")  # the one place that chooses a kernel
    assert "flex" not in engine_imports("methods")  # the registry asks backend, never the compiler


def test_pages_and_the_ui_reach_kernels_only_through_the_registry_or_backend():
    """No page or ui module calls a kernel module's attention directly: they go through
    the registry (methods), the summaries or the backend."""
    root = ATTN.parent
    offenders = []
    for p in [*root.glob("pages/*.py"), *root.glob("ui/*.py")]:
        text = p.read_text(encoding="utf-8")
        for call in ("flex.window_attention", "flex.sparse_attention", "kernels.window_attention_blocked",
                     "kernels.sparse_attention"):
            if call in text:
                offenders.append((p.name, call))
    assert not offenders, offenders
