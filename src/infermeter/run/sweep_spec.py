"""`SweepSpec`: what a sweep runs, its settings defined once.

Apart from `run/sweep.py` (which loads models and profiles) so that the CLI builds `sweep`'s
options from these fields without importing the profiler and pandas at start-up.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from typing import Any, TypedDict

from infermeter.errors import UserError
from infermeter.knobs import Knob, get_knob
from infermeter.run.config import RunConfig, RunConfigDoc
from infermeter.util.settings import setting

#: the most points a sweep may have: 10,000 points of a second each is three hours; an 8 KB file
#: expanding to 10^8 points ran out of memory after 49 s before the limit (issue 35)
MAX_POINTS = 10_000
#: the longest sweep name the store keeps (its column: PostgreSQL refuses longer, SQLite not)
MAX_NAME_CHARS = 200

#: RunConfig fields added after sweep ids were first stored (as `to_dict` gives their default)
LATER_FIELDS: dict[str, Any] = {
    "slos": [],
    "nvtx": False,
    "prompts_source": None,
    "prompt_kind": "natural",
    "cache": "dynamic",
    "threads": None,
}


class _SweepSpecDoc(TypedDict):
    name: str
    base: RunConfigDoc
    #: per knob, its values as given (text), in the given order
    knobs: dict[str, list[str]]


class SweepSpecDoc(_SweepSpecDoc, total=False):
    """`SweepSpec.to_dict`: what defines a sweep, as its store row and its JSON keep it.

    `interleave` is there (True) only for an interleaved sweep, so a sequential one keeps the
    form it always had.
    """

    interleave: bool


@dataclass(frozen=True)
class SweepSpec:
    """What a sweep runs: the base configuration and, per knob, the values to try (as text)."""

    base: RunConfig
    knobs: dict[str, list[str]] = setting(
        option="--knob", help="NAME=V1,V2,... (repeatable); see `infermeter knobs`."
    )
    name: str = setting("sweep", option="--name", help="A name for the sweep.")
    #: measure the points sample by sample in turn (run/interleave.py) instead of one by one
    interleave: bool = setting(
        False,
        option="--interleave",
        help="Measure the points sample by sample in turn (A B, B A, ...) so a drift of the "
        "machine falls on all alike; compare then pairs their samples. One loaded model: not "
        "with dtype or compile.",
    )

    def parsed(self) -> list[tuple[Knob, list[Any]]]:
        """(knob, parsed values) per knob, in the given order; UserError on any bad value."""
        if not self.knobs:
            raise UserError("a sweep needs at least one --knob", "e.g. --knob top_k=1,2,4")
        if len(self.name) > MAX_NAME_CHARS:
            raise UserError(
                f"the sweep name is {len(self.name)} characters long",
                f"use at most {MAX_NAME_CHARS}",
            )
        total = math.prod(len(v) for v in self.knobs.values())
        if total > MAX_POINTS:
            counts = " x ".join(f"{len(v)} {k}" for k, v in self.knobs.items())
            raise UserError(
                f"the sweep has {total:,} points ({counts})",
                f"use at most {MAX_POINTS:,}: fewer values per knob, or split it into sweeps",
            )
        out = []
        for name, values in self.knobs.items():
            knob = get_knob(name)
            if not values:
                raise UserError(f"--knob {name} has no values", f"e.g. --knob {name}=1,2")
            out.append((knob, [knob.parse(v) for v in values]))
        return out

    def points(self) -> list[dict[str, Any]]:
        """Every combination, as {knob name: parsed value}."""
        grid = self.parsed()
        names = [k.name for k, _ in grid]
        return [
            dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(vals for _, vals in grid))
        ]

    def to_dict(self) -> SweepSpecDoc:
        """What defines the sweep (for its id and its JSON)."""
        doc: SweepSpecDoc = {"name": self.name, "base": self.base.to_dict(), "knobs": self.knobs}
        if self.interleave:
            doc["interleave"] = True
        return doc

    @property
    def sweep_id(self) -> str:
        """Stable id: the same model, base configuration and grid give the same id.

        An interleaved sweep is another sweep (its samples were taken differently): its id
        differs; a sequential one keeps the id it always had. SLOs are part of the definition
        only when given, and so is every field added to `RunConfig` after sweeps had ids.
        """
        base: dict[str, Any] = dict(self.base.to_dict())
        for name, default in LATER_FIELDS.items():
            if base.get(name) == default:  # at its default: the id it had before the field
                del base[name]
        what: dict[str, Any] = {"base": base, "knobs": self.knobs}
        if self.interleave:
            what["interleave"] = True
        blob = json.dumps(what, sort_keys=True, default=str)
        return hashlib.sha1(blob.encode()).hexdigest()[:12]
