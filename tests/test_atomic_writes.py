"""Every file the code writes goes through the atomic writer (docs/design.md, "Files it writes").

A report figure written straight to its name was left half-written by a Ctrl-C (issue 56 found
`breakdown_figure` doing so while the design said every file was atomic). This reads the source:
each call that writes a file (savefig, to_csv, to_parquet, write_text, write_bytes, write_html,
write_image, open for writing) must write to a name bound by `with atomic_path(...) as NAME`
around it, or be one of the few writes below that are not a user's file, each with its reason.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "infermeter"

# Writes whose file is not one a user keeps: (path under src/infermeter, code on the line, why).
NOT_A_USERS_FILE = [
    ("util/atomic.py", 'open(tmp, "x"', "the atomic writer itself"),
    ("cli/output.py", 'probe.write_text("")', "an empty probe proving the folder is writable"),
    ("measure/memory.py", 'open(_CLEAR_REFS, "w")', "a /proc control file, not a file on disk"),
    ("util/native.py", 'open(os.devnull, "w")', "the null device"),
    ("report/gate_outputs.py", 'open(github, "a"', "CI's step summary: appended to, not ours"),
    ("experiments/tensor_parallel.py", "OWNER_FILE).write_text", "a private temp folder"),
    ("experiments/tensor_parallel.py", '"config.pickle").write_bytes', "a private temp folder"),
    ("experiments/tensor_parallel.py", "job_file.write_text", "a private temp folder"),
    ("experiments/tensor_parallel.py", 'Path(job["result"]).write_text', "a private temp folder"),
]

WRITERS_BY_ARGUMENT = {"savefig", "to_csv", "to_parquet", "write_html", "write_image"}
WRITERS_BY_RECEIVER = {"write_text", "write_bytes"}


@dataclass(frozen=True)
class Write:
    """One call that writes a file, where it is, and whether an atomic name is its target."""

    path: str
    line: int
    code: str
    atomic: bool


def _mode_writes(call: ast.Call, position: int) -> bool:
    """Whether an open() call's mode (positional or keyword) writes, appends or creates."""
    mode: ast.expr | None = call.args[position] if len(call.args) > position else None
    for kw in call.keywords:
        if kw.arg == "mode":
            mode = kw.value
    return isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax+")


def _names_in(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _target(call: ast.Call) -> ast.expr | None:
    """The expression naming the file a call writes, or None when it writes none."""
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr in WRITERS_BY_ARGUMENT and call.args:
            return call.args[0]
        if func.attr in WRITERS_BY_RECEIVER:
            return func.value
        if func.attr == "open" and _mode_writes(call, 0):
            return func.value
    if isinstance(func, ast.Name) and func.id == "open" and call.args and _mode_writes(call, 1):
        return call.args[0]
    return None


def _is_atomic_path(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Call) and (
        (isinstance(expr.func, ast.Name) and expr.func.id == "atomic_path")
        or (isinstance(expr.func, ast.Attribute) and expr.func.attr == "atomic_path")
    )


def writes_in(source: str, path: str) -> list[Write]:
    """Every file-writing call in `source`, judged against the atomic names around it."""
    lines = source.splitlines()
    found: list[Write] = []

    def visit(node: ast.AST, atomic_names: frozenset[str]) -> None:
        if isinstance(node, ast.With | ast.AsyncWith):
            bound = {
                item.optional_vars.id
                for item in node.items
                if _is_atomic_path(item.context_expr) and isinstance(item.optional_vars, ast.Name)
            }
            atomic_names = atomic_names | bound
        if isinstance(node, ast.Call):
            target = _target(node)
            if target is not None:
                code = lines[node.lineno - 1].strip()
                found.append(Write(path, node.lineno, code, bool(_names_in(target) & atomic_names)))
        for child in ast.iter_child_nodes(node):
            visit(child, atomic_names)

    visit(ast.parse(source), frozenset())
    return found


def _all_writes() -> list[Write]:
    out: list[Write] = []
    for file in sorted(SRC.rglob("*.py")):
        rel = file.relative_to(SRC).as_posix()
        out += writes_in(file.read_text(encoding="utf-8"), rel)
    return out


def _excused(w: Write) -> bool:
    return any(w.path == p and code in w.code for p, code, _ in NOT_A_USERS_FILE)


def test_every_file_the_code_writes_goes_through_the_atomic_writer() -> None:
    writes = _all_writes()
    assert len(writes) >= 15, "the scan found too few writes to be reading the source"
    bare = [f"{w.path}:{w.line}: {w.code}" for w in writes if not w.atomic and not _excused(w)]
    assert not bare, "written straight to the final name (use util.atomic.atomic_path):\n" + (
        "\n".join(bare)
    )


def test_every_excused_write_still_exists() -> None:
    """An excuse outliving its write would let a new bare write on that line pass unseen."""
    writes = _all_writes()
    for path, code, why in NOT_A_USERS_FILE:
        hits = [w for w in writes if w.path == path and code in w.code]
        assert hits, f"{path}: no write matching {code!r} ({why}); drop the excuse"


def test_the_scan_tells_a_bare_write_from_an_atomic_one() -> None:
    source = """
def bare(fig, out, frame):
    fig.savefig(out / "a.png")
    frame.to_csv(out / "a.csv")
    (out / "a.md").write_text("x")
    with open(out / "a.json", "w") as fh:
        fh.write("{}")

def atomic(fig, out, frame):
    with atomic_path(out / "a.png") as tmp:
        fig.savefig(tmp)
    with atomic_path(out / "a.csv") as tmp, tmp.open("x") as fh:
        fh.write("x")
    with atomic_path(out / "a.md") as tmp:
        Path(tmp).write_text("x")
    with open(out / "a.json") as fh:  # reading is not writing
        fh.read()
"""
    writes = writes_in(source, "example.py")
    assert [(w.line, w.atomic) for w in writes] == [
        (3, False),
        (4, False),
        (5, False),
        (6, False),
        (11, True),
        (12, True),
        (15, True),
    ]
