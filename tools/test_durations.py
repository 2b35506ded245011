"""Record each test's time from a JUnit XML report into tests/durations.json.

`make test` runs the test files on both cores, longest first (tests/conftest.py orders them by
these times, so a long file never starts last on one core while the other sits idle), and
`make test-fast` leaves out the tests recorded over half a second. Re-record after adding
slow tests:

    .venv/bin/pytest -q -p no:xdist --junitxml=/tmp/t.xml
    python3 tools/test_durations.py /tmp/t.xml

A serial run (`-p no:xdist`) is the one to record: on both cores each test's time includes the
other worker's contention. After changing a few files, `--merge` records just their report:

    .venv/bin/pytest -q -p no:xdist --junitxml=/tmp/t.xml tests/store/test_faults.py
    python3 tools/test_durations.py --merge /tmp/t.xml
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "durations.json"


def node_id(classname: str, name: str) -> str:
    """The pytest node id of a JUnit test case.

    The longest prefix of `classname` that is a file under the repository is the module; the
    rest are its classes.
    """
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (ROOT / path).is_file():
            return "::".join([path, *parts[cut:], name])
    raise SystemExit(f"no test file for {classname!r}: run this from the report's checkout")


def durations_s(report: Path) -> dict[str, float]:
    """Each test case's seconds (setup, call and teardown), by node id."""
    out: dict[str, float] = {}
    for case in ET.parse(report).iter("testcase"):
        key = node_id(case.get("classname", ""), case.get("name", ""))
        out[key] = round(float(case.get("time", 0.0)), 2)
    return out


def main() -> None:
    """Read the report named on the command line and write tests/durations.json."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="pytest --junitxml output of a whole serial run")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="a report of some files: replace those files' tests and keep every other record",
    )
    args = ap.parse_args()
    found = durations_s(args.report)
    if args.merge:
        files = {key.split("::")[0] for key in found}
        kept = json.loads(OUT.read_text())
        found = {**{k: v for k, v in kept.items() if k.split("::")[0] not in files}, **found}
    OUT.write_text(json.dumps(dict(sorted(found.items())), indent=0) + "\n")
    print(f"{len(found)} tests, {sum(found.values()):.0f} s in all -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
