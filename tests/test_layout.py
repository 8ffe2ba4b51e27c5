"""The layout shows the pipeline: spec -> model -> adapters -> explore -> corpus -> certify.

Every import between kraftcheck's packages points upstream (or stays inside its own
component), so each package can be read, tested and shipped without those after it.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("spec", "model", "adapters", "conformance")

# Components in pipeline order: a module may import its own component and those listed
# before it, never one after it. spec.trace is written in the model's terms (events,
# messages, configurations), so it sits after model/ although it lives in spec/.
# Components on one line share a rank and may not import each other.
ORDER = (
    ("spec",),
    ("model",),
    ("spec.trace",),
    ("adapters",),
    ("conformance.text", "conformance.outputs"),
    ("conformance.spark",),
    ("conformance.diagrams",),
    ("conformance.explore", "conformance.coverage"),
    ("conformance.corpus",),
    ("conformance.certify",),
    ("conformance.scenario",),
    ("conformance.cluster",),
    ("conformance.validate",),
    ("conformance.commands",),
    ("conformance.cli",),
    ("conformance",),  # the package itself: a docstring
)
RANK = {component: rank for rank, line in enumerate(ORDER) for component in line}


def component(module: str) -> str:
    """The most specific component a module belongs to."""
    parts = module.split(".")
    for length in range(len(parts), 0, -1):
        prefix = ".".join(parts[:length])
        if prefix in RANK:
            return prefix
    raise KeyError(module)


def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a kraftcheck package in a file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: relative import"
            submodules = [f"{node.module}.{alias.name}" for alias in node.names if is_module(f"{node.module}.{alias.name}")]
            names = submodules or [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] in PACKAGES and is_module(name):
                found.append((node.lineno, name))
    return found


def is_module(name: str) -> bool:
    """`a.b.c` names a module or package of the tree (not a function imported from one)."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def source_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def layering(modules: dict[str, Path]) -> tuple[list[str], set[tuple[str, str]]]:
    """The imports that point downstream, and every (importer, imported) pair of components seen."""
    wrong = []
    seen_across = set()
    for name, path in modules.items():
        mine = component(name)
        for line, imported in imports_of(path):
            theirs = component(imported)
            if theirs == mine:
                continue
            seen_across.add((mine, theirs))
            if RANK[theirs] >= RANK[mine]:
                wrong.append(f"{path}:{line}: {mine} imports {imported} ({theirs} does not come before it)")
    return wrong, seen_across


def test_every_module_belongs_to_a_component():
    for name in source_modules():
        component(name)  # raises KeyError for a module outside the table


def test_imports_point_upstream_only():
    wrong, seen_across = layering(source_modules())
    assert not wrong, "\n".join(wrong)
    # The check sees the imports it is about: the trace types cross into adapters and model.
    assert {("adapters", "spec.trace"), ("spec.trace", "model"), ("model", "spec"), ("conformance.certify", "adapters"), ("conformance.corpus", "conformance.explore")} <= seen_across


def test_adapters_spec_and_model_do_not_import_conformance():
    for path in [p for package in ("adapters", "spec", "model") for p in (ROOT / package).rglob("*.py")]:
        assert not [name for _, name in imports_of(path) if name.startswith("conformance")], path


@pytest.mark.parametrize("package", ["spec", "model", "adapters", "conformance", "conformance/explore", "conformance/corpus", "conformance/certify", "conformance/certify/reports", "conformance/coverage", "conformance/diagrams", "conformance/commands", "conformance/scenario", "model/isr"])
def test_every_package_opens_with_a_docstring(package):
    init = ROOT / package / "__init__.py"
    assert ast.get_docstring(ast.parse(init.read_text())), f"{init} has no docstring"


@pytest.mark.parametrize(
    "module, source, complaint",
    [
        ("model.probe", "from conformance.explore import engine\n", "model imports conformance.explore.engine"),
        ("adapters.probe", "def f():\n    from spec.trace import Trace\n    import conformance.certify.replay\n", "adapters imports conformance.certify.replay"),
        ("conformance.explore.probe", "from conformance.corpus.cells import input_kind\n", "conformance.explore imports conformance.corpus.cells"),
        ("conformance.explore.probe", "from conformance.coverage import measure\n", "conformance.explore imports conformance.coverage.measure"),
        ("spec.errors_probe", "from spec import trace\n", "spec imports spec.trace"),
    ],
)
def test_a_downstream_import_is_caught(tmp_path, module, source, complaint):
    """The rule can fail: each of these imports, inside a module of the tree, is reported."""
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    wrong, _ = layering({module: probe})
    assert len(wrong) == 1 and complaint in wrong[0], wrong
