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
    for kernel in ("kernels", "sparse_kernels", "linear_kernels"):  # pure torch: no dispatch, no compiler
        assert engine_imports(kernel) <= {"patterns", "features", "kernels"}, kernel
    assert engine_imports("flex") == {"patterns"}  # compiles and calls; the self-check is backend's
    assert engine_imports("composition") == {"patterns"}  # the algebra of parts, over the patterns
    # top-k selection: pure torch, chosen by the registry (its argument check is patterns', as the kernels' are)
    assert engine_imports("topk") <= {"patterns"}
    assert {"flex", "kernels"} <= engine_imports("backend")  # the one place that chooses a kernel
    assert "flex" not in engine_imports("methods")  # the registry asks backend, never the compiler


def test_pages_and_the_ui_reach_kernels_only_through_the_registry_or_backend():
    """No page or ui module calls a kernel module's attention directly: they go through
    the registry (methods), the summaries or the backend."""
    root = ATTN.parent
    offenders = []
    for p in root.glob("ui/**/*.py"):  # the pages' files among them
        text = p.read_text(encoding="utf-8")
        for call in ("flex.window_attention", "flex.sparse_attention", "kernels.window_attention_blocked",
                     "sparse_kernels.sparse_attention", "linear_kernels.linear_attention"):
            if call in text:
                offenders.append((p.name, call))
    assert not offenders, offenders


def _app_sources():
    root = ATTN.parent
    return [p for p in [*root.glob("ui/**/*.py"), *ATTN.glob("*.py"), root / "app.py"] if p.name != "methods.py"]


def test_method_names_are_written_in_the_registry_only():
    """Outside attn/methods.py, no code compares a method's name with a literal name or
    asks the registry for one by a literal: it asks the registry (methods.own(),
    methods.window(hubs=True), a field such as ``with_hubs``, a tag)."""
    from attn import methods

    names = set(methods.METHODS)
    found = []
    for p in _app_sources():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                named = any(isinstance(s, ast.Attribute) and s.attr in ("name", "method") for s in sides)
                literal = any(isinstance(s, ast.Constant) and s.value in names for s in sides)
                if named and literal:
                    found.append((p.name, node.lineno))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and isinstance(node.func.value, ast.Name) and node.func.value.id == "methods"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                found.append((p.name, node.lineno))
    assert not found, found


def test_pages_import_no_kernel_module():
    """Pages read the engine through the registry, the summaries and the ui modules: none
    imports a kernel module, the compiler's, the backend or the feature maps."""
    kernel_modules = {"kernels", "sparse_kernels", "linear_kernels", "flex", "backend", "features", "patterns"}
    found = []
    for p in ATTN.parent.glob("pages/*/page.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "attn":
                found += [(p.name, a.name) for a in node.names if a.name in kernel_modules]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attn."):
                if node.module.split(".")[1] in kernel_modules:
                    found.append((p.name, node.module))
    assert not found, found


def test_the_registry_names_each_role_once():
    from attn import methods

    assert methods.own().family == "own" and methods.exact().family == "full"
    assert not methods.window().with_hubs and methods.window(hubs=True).with_hubs
    assert methods.window().name != methods.window(hubs=True).name
    assert methods.composed().family == "pattern"
    assert [m for m in methods.METHODS.values() if m.with_hubs] == [methods.window(hubs=True)]
    assert methods.linear("elu").formula and methods.own().formula is None
    assert methods.top_k().indexer_dims is None and methods.top_k(indexer=True).indexer_dims == methods.INDEXER_DIMS
    assert [m for m in methods.METHODS.values() if m.data_dependent] == [methods.top_k(), methods.top_k(indexer=True)]
