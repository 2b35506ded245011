"""Numbers as people read them, one formatter per kind, shared by the CLI and the reports.

Missing values (None, NaN) print as "-" everywhere, so a table never shows "nan" or "None".
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "-"


def is_missing(v: Any) -> bool:
    """None or a NaN float."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def or_nan(v: float | None) -> float:
    """None as NaN: a missing figure in arithmetic (a gap in a plotted line, not a crash)."""
    return math.nan if v is None else v


def fixed(v: Any, digits: int = 2) -> str:
    """Floats with thousands separators and `digits` decimals; other values as text."""
    if is_missing(v):
        return MISSING
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def significant(v: Any) -> str:
    """Floats to 4 significant digits, whole below 10^4 only when large; other values as text."""
    if is_missing(v):
        return MISSING
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


def scaled(v: float | None, scale: float) -> str:
    """`v / scale` to 3 significant digits (GFLOP from FLOP: scale 1e9)."""
    if v is None or is_missing(v):
        return MISSING
    return f"{v / scale:,.3g}"


def si(v: float | None, unit: str) -> str:
    """With an SI prefix: 1.2e12 FLOP/s -> '1.2 TFLOP/s'."""
    if v is None or is_missing(v):
        return MISSING
    for prefix, factor in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= factor:
            return f"{v / factor:,.1f} {prefix}{unit}"
    return f"{v:,.2f} {unit}"


def plural(n: int, word: str) -> str:
    """'1 sample', '2 samples' (issue 59: "1 samples" in a header): `word` takes an s."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def count(n: int | None) -> str:
    """A parameter or token count: 134515008 -> '134.52 M'."""
    if not n:
        return MISSING
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return str(n)


def ms(v: Any) -> str:
    """Milliseconds to the microsecond: 1234.5 -> '1,234.500'."""
    return MISSING if is_missing(v) else f"{v:,.3f}"


def sig3(v: Any) -> str:
    """Three significant digits, for statistics whose scale varies."""
    return MISSING if is_missing(v) else f"{v:.3g}"


def compact(v: Any) -> str:
    """About three significant digits without an exponent: 1,786 / 24.6 / 8.21 / 0.0412."""
    if is_missing(v):
        return MISSING
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    return f"{v:.1f}" if a >= 10 else f"{v:.3g}"


def whole(v: Any) -> str:
    """A whole number (counts stored as floats)."""
    return MISSING if is_missing(v) else str(int(v))


def pct(v: Any) -> str:
    """A percentage that is already in percent: 12.345 -> '12.3%'."""
    return MISSING if is_missing(v) else f"{v:.1f}%"
