"""Settings defined once: a spec's field carries its help, CLI spelling and range.

Why: the load, capacity and endpoint specs were validated by hand-written checks in the spec and
again in the CLI, with help texts written beside the options; the two drifted (a range checked
twice with different bounds, an option's help saying "default 16" when the spec said otherwise).
A field made by `setting()` is the one place: the CLI builds its option from it
(`cli/options.spec_option`), and `check_ranges` refuses an out-of-range value in one line that
names the option and the range, before anything loads.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from infermeter.errors import UserError


def _num(value: float) -> str:
    """1000000 rather than 1e+06: a bound a user types back."""
    if math.isfinite(value) and float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}"


@dataclass(frozen=True)
class Range:
    """The values a numeric setting may take: `low..high`, an end excluded where it is open."""

    low: float
    high: float
    open_low: bool = False
    open_high: bool = False
    #: the unit said after the range in the fix ("seconds", "ms"), "" for counts
    unit: str = ""

    def holds(self, value: float) -> bool:
        """Whether `value` is in range (NaN never is)."""
        if isinstance(value, float) and math.isnan(value):
            return False
        above = value > self.low if self.open_low else value >= self.low
        below = value < self.high if self.open_high else value <= self.high
        return above and below

    def fix(self) -> str:
        """The fix a user reads: 'use 1..100000', 'use above 0, at most 1e+06 seconds'."""
        unit = f" {self.unit}" if self.unit else ""
        if not self.open_low and not self.open_high:
            return f"use {_num(self.low)}..{_num(self.high)}{unit}"
        low = f"above {_num(self.low)}" if self.open_low else f"{_num(self.low)} or more"
        if math.isinf(self.high):
            return f"use {low}{unit}"
        high = f"below {_num(self.high)}" if self.open_high else f"at most {_num(self.high)}"
        return f"use {low}, {high}{unit}"


@dataclass(frozen=True)
class Setting:
    """What the user sees of one spec field: its help, its option's spelling, its range."""

    help: str
    #: the option that sets it ("--rate"); a field without one is not a user setting
    option: str
    within: Range | None = None


def setting(
    default: Any = MISSING,
    *,
    help: str,
    option: str,
    within: Range | None = None,
    factory: Any = MISSING,
) -> Any:
    """A dataclass field with its `Setting` (the CLI's option and the range check read it)."""
    meta = {"setting": Setting(help, option, within)}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def settings_of(cls: type) -> dict[str, Setting]:
    """A spec's settings by field name (fields made by `setting()` only)."""
    return {
        f.name: f.metadata["setting"]
        for f in fields(cls)
        if isinstance(f.metadata.get("setting"), Setting)
    }


def default_of(cls: type, name: str) -> Any:
    """A spec field's default (its factory's value for a mutable one)."""
    for f in fields(cls):
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory()
            raise KeyError(f"{cls.__name__}.{name} has no default")
    raise KeyError(f"{cls.__name__} has no field {name}")


def check_ranges(spec: Any, spelled: dict[str, str] | None = None) -> None:
    """Every ranged setting of `spec` within its range (None means 'not set' and passes).

    Args:
        spec: a dataclass instance whose fields were made by `setting()`.
        spelled: field -> option, where the command at hand spells an option otherwise
            (`load capacity --requests-per-rate` sets the requests a rate runs).
    """
    for name, s in settings_of(type(spec)).items():
        value = getattr(spec, name)
        if s.within is None or value is None or isinstance(value, bool):
            continue
        if not s.within.holds(float(value)):
            option = (spelled or {}).get(name, s.option)
            raise UserError(f"{option} {_num(float(value))} is out of range", s.within.fix())
