"""The layering and size rules of docs/design.md, checked on the source itself.

Layers, bottom to top: a module may import its own package and packages of lower layers only,
also inside functions (a lazy import is still a dependency). Functions stay under 80 lines
unless they say why they are longer ("Long because ..." in the docstring, or in a comment for
CLI commands, whose docstring is their help text).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "infermeter"

#: docs/design.md, "Layers": one set per layer, bottom first.
LAYERS: list[set[str]] = [
    {"_version", "errors", "paths"},
    {"util"},
    {"extras"},
    {"measure"},
    {"workloads"},
    {"models"},
    {"instrument", "knobs"},
    {"run", "bench"},
    {"serving"},
    {"analysis"},
    {"store"},
    {"report"},
    {"experiments"},
    {"dashboard"},
    {"cli"},
    {"__init__", "__main__"},
]
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}
#: third-party libraries a package must never import (docs/design.md)
FORBIDDEN = {
    "measure": {"transformers"},
    "analysis": {"torch", "transformers", "matplotlib"},
    "util": {"torch", "transformers", "numpy", "pandas"},
}
MAX_FUNCTION_LINES = 80


def _package(path: Path) -> str:
    return path.relative_to(SRC).parts[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
    return out


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_every_package_has_a_layer():
    packages = {_package(p) for p in _sources()}
    assert packages == set(RANK), f"add {packages - set(RANK)} to LAYERS and docs/design.md"


def test_no_lower_layer_imports_a_higher_one():
    bad = []
    for path in _sources():
        pkg = _package(path)
        for line, module in _imports(path):
            parts = module.split(".")
            if parts[0] != "infermeter" or (len(parts) > 1 and parts[1] == pkg):
                continue
            # `from infermeter import X` is the top package: the highest layer of all
            top = "__init__" if len(parts) == 1 else parts[1]
            if top != pkg and RANK[top] >= RANK[pkg]:
                bad.append(f"{path.relative_to(SRC)}:{line} ({pkg}) imports {module}")
    assert not bad, "\n".join(bad)


def test_packages_keep_away_from_heavy_libraries_they_must_not_use():
    bad = []
    for path in _sources():
        forbidden = FORBIDDEN.get(_package(path), set())
        for line, module in _imports(path):
            if module.split(".")[0] in forbidden:
                bad.append(f"{path.relative_to(SRC)}:{line} imports {module}")
    assert not bad, "\n".join(bad)


def test_the_layer_check_catches_an_upward_import(tmp_path):
    """The rule above can fail: a lazy upward import in a function is found, and an import of
    the top package itself (`from infermeter import __version__` in run/ went unseen)."""
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    from infermeter.cli.app import app\n"
        "    from infermeter import __version__\n    return app\n"
    )
    assert (2, "infermeter.cli.app") in _imports(module)
    assert (3, "infermeter") in _imports(module)


@pytest.mark.parametrize("pkg", sorted(p for p in RANK if p not in ("__init__", "__main__")))
def test_each_package_imports_on_its_own(pkg):
    importlib.import_module(f"infermeter.{pkg}")


def _long_functions(path: Path) -> list[str]:
    out = []
    text = path.read_text()
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = node.end_lineno - node.lineno + 1
        body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        if length > MAX_FUNCTION_LINES and "Long because" not in body:
            out.append(f"{path.name}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_functions_are_short_or_say_why_not():
    long = [f for path in _sources() for f in _long_functions(path)]
    assert not long, "split these, or say 'Long because ...' in the docstring:\n" + "\n".join(long)


def _mb_names(text: str) -> list[str]:
    """Names and keys ending `_mb`: memory here is MiB and says so (`_mib`)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        name = None
        if isinstance(node, ast.Name | ast.arg):
            name = node.id if isinstance(node, ast.Name) else node.arg
        elif isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value
        elif isinstance(node, ast.FunctionDef | ast.keyword):
            name = node.name if isinstance(node, ast.FunctionDef) else node.arg
        if name and re.fullmatch(r"[a-z_]+_mb", name):
            found.append(name)
    return found


def test_memory_names_say_mib():
    from infermeter.store.schema import RENAMED_COLUMNS

    history = {old for renames in RENAMED_COLUMNS.values() for _, old, _ in renames}
    bad = [
        f"{path.name}: {n}"
        for path in _sources()
        for n in _mb_names(path.read_text())
        if n not in history  # the old column names an upgrade renames
    ]
    assert not bad, "memory is MiB here: name it _mib (or _bytes)\n" + "\n".join(bad)
    sample = "def f(peak_mb):\n    return {'rss_mb': x.total_mb, 'ok_mib': 1}"
    assert sorted(_mb_names(sample)) == ["peak_mb", "rss_mb", "total_mb"]


def test_the_length_check_catches_a_long_function_and_accepts_a_reason(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    module = tmp_path / "m.py"
    module.write_text(f"def long():\n{body}")
    assert _long_functions(module) == [f"m.py:1 long ({MAX_FUNCTION_LINES + 1} lines)"]
    module.write_text(f"def long():\n    # Long because it is a test.\n{body}")
    assert _long_functions(module) == []


def test_the_design_doc_names_only_modules_that_exist_and_every_package():
    """docs/design.md is the design of record: a module it names must exist (it once named
    functions and modules long gone), and every package must be in it."""
    import re

    root = SRC.parents[1]
    text = (root / "docs" / "design.md").read_text()
    named = set(re.findall(r"[a-z_][a-z0-9_/]*/[a-z0-9_]+\.py\b", text))  # not NAME_cmd.py
    assert len(named) > 50  # the pattern still finds the doc's module names
    homes = [SRC.parent, root / "tests", root / "benchmarks", root / "tools"]
    missing = sorted(
        p
        for p in named
        if not (root / p).is_file() and not any(next(h.rglob(p), None) for h in homes)
    )
    assert not missing, f"docs/design.md names modules that do not exist: {missing}"
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())
    absent = [p for p in packages if f"{p}/" not in text and f"`{p}`" not in text]
    assert not absent, f"packages docs/design.md does not describe: {absent}"
