"""Result documents for Python users: the plain dict the JSON report holds, plus a table.

`analyze_run`, `compare_runs`, `run_load` and `predict_load` return documents that scripts,
`json.dumps` and older callers treat as the dicts they always were; a notebook also gets the
main table as a DataFrame (`.to_frame()`, any other table by its key) and a short repr instead
of a screen of nested dicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import pandas as pd


class Document(dict[str, Any]):
    """A result document: a dict, with `to_frame()` and a one-screen repr.

    Subclasses name their main table with `rows_key` (dotted for a nested one, such as
    "roofline.rows").
    """

    rows_key: ClassVar[str] = ""

    def rows(self, key: str | None = None) -> list[Any]:
        """The rows under `key` (the main table's by default); [] where there are none."""
        node: Any = self
        for part in (key or self.rows_key).split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return list(node) if isinstance(node, list) else []

    def to_frame(self, key: str | None = None) -> pd.DataFrame:
        """The main table (or the list of rows under `key`) as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.rows(key))

    def headline(self) -> dict[str, Any]:
        """The document's scalar top-level values: what its repr shows."""
        return {k: v for k, v in self.items() if isinstance(v, str | int | float | bool)}

    def __repr__(self) -> str:
        items = [f"{k}={_short(v)}" for k, v in self.headline().items()]
        items.append(f"{self.rows_key or 'rows'}: {len(self.rows())} rows")
        return f"{type(self).__name__}({', '.join(items)})"

    def _repr_html_(self) -> str:
        """A notebook's view: the headline values, then the main table."""
        from html import escape

        head = "".join(
            f"<tr><th>{escape(str(k))}</th><td>{escape(_short(v))}</td></tr>"
            for k, v in self.headline().items()
        )
        frame = self.to_frame()
        table = frame._repr_html_() if not frame.empty else "<p>(no rows)</p>"
        return f"<b>{type(self).__name__}</b><table>{head}</table>{table}"


def _short(value: Any, width: int = 60) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text if len(text) <= width else text[: width - 3] + "..."


class Analysis(Document):
    """`analyze_run`'s document: roofline rows (main table), findings, the time model."""

    rows_key = "roofline.rows"


class Comparison(Document):
    """`compare_runs`' document: per-phase speedups with intervals (main table), layers."""

    rows_key = "phases"


class Prediction(Document):
    """`predict`'s document: one row per batch size (main table): memory, TTFT, TPOT, rates."""

    rows_key = "rows"


class LoadResult(Document):
    """`run_load`'s document: one row per request (main table), summary, timeline, steps."""

    rows_key = "all_samples"

    def headline(self) -> dict[str, Any]:
        """The model and the summary's scalar figures (requests, rates, p50s, ...)."""
        summary = self.get("summary") or {}
        flat = {k: v for k, v in summary.items() if isinstance(v, str | int | float | bool)}
        return {"model": (self.get("meta") or {}).get("model"), **flat}


class LoadPrediction(Document):
    """`predict_load`'s document: one row per offered rate (main table), capacity, notes."""

    rows_key = "points"
