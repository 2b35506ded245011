"""What a CI gate leaves behind: a JUnit XML file and a Markdown summary.

`compare --fail-if-slower` and `load --fail-if-slo-missed` are gates; in CI a failed one should
read well where people look: the test report of any CI (JUnit XML, which every CI parses) and
the job's summary page (Markdown; appended to `$GITHUB_STEP_SUMMARY` when GitHub Actions sets
it). Each check of the gate is one test case: passed, failed with its one-line reason, or
skipped when the gate was not asked for (the figures are still there to read).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infermeter.util.atomic import write_text_atomic

#: GitHub Actions' file for the job summary (Markdown, appended to)
GITHUB_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


@dataclass(frozen=True)
class GateCase:
    """One check of a gate: its name, whether it held, and why, in one line."""

    name: str
    passed: bool
    message: str
    #: False when the gate was not asked for: reported as skipped, never as a failure
    gated: bool = True

    @property
    def status(self) -> str:
        """passed, FAILED or not gated."""
        if not self.gated:
            return "not gated"
        return "passed" if self.passed else "FAILED"


def junit_xml(suite: str, cases: Sequence[GateCase], time_s: float = 0.0) -> str:
    """The cases as a JUnit XML document (one `testsuite` in a `testsuites` root)."""
    failures = sum(1 for c in cases if c.gated and not c.passed)
    skipped = sum(1 for c in cases if not c.gated)
    root = ET.Element("testsuites", name="infermeter", tests=str(len(cases)))
    root.set("failures", str(failures))
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)))
    node.set("failures", str(failures))
    node.set("skipped", str(skipped))
    node.set("time", f"{time_s:.3f}")
    for c in cases:
        case = ET.SubElement(node, "testcase", classname=f"infermeter.{suite}", name=c.name)
        if not c.gated:
            ET.SubElement(case, "skipped", message=c.message)
        elif not c.passed:
            ET.SubElement(case, "failure", message=c.message, type="gate").text = c.message
        else:
            ET.SubElement(case, "system-out").text = c.message
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode")


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value).replace("|", "\\|")


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """Rows (dicts with the same keys) as a Markdown table."""
    if not rows:
        return "(no rows)\n"
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def summary_markdown(
    title: str, cases: Sequence[GateCase], tables: Sequence[tuple[str, Sequence[dict[str, Any]]]]
) -> str:
    """The gate's verdict first, then each check, then the figures it judged."""
    failed = [c for c in cases if c.gated and not c.passed]
    gated = [c for c in cases if c.gated]
    verdict = (
        f"**FAILED**: {len(failed)} of {len(gated)} checks"
        if failed
        else (f"**passed**: {len(gated)} checks" if gated else "no gate asked for")
    )
    out = [f"### {title}", "", verdict, ""]
    out += [f"- {c.status}: {c.name}: {c.message}" for c in cases]
    for heading, rows in tables:
        out += ["", f"**{heading}**", "", markdown_table(rows)]
    return "\n".join(out).rstrip() + "\n"


def write_gate_outputs(
    junit: Path | None,
    summary: Path | None,
    suite: str,
    title: str,
    cases: Sequence[GateCase],
    tables: Sequence[tuple[str, Sequence[dict[str, Any]]]] = (),
) -> list[Path]:
    """Write what was asked for (and append to GitHub's job summary); return the files."""
    written: list[Path] = []
    if junit is not None:
        written.append(write_text_atomic(junit, junit_xml(suite, cases)))
    text = summary_markdown(title, cases, tables)
    if summary is not None:
        written.append(write_text_atomic(summary, text))
    github = os.environ.get(GITHUB_SUMMARY_ENV)
    if github:
        with open(github, "a", encoding="utf-8") as fh:  # the job's summary collects every step
            fh.write(text + "\n")
        written.append(Path(github))
    return written
