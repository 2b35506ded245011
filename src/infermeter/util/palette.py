"""One set of colours for every figure: the report's matplotlib PNGs and the dashboard's charts.

Okabe and Ito's eight colours ("Color Universal Design", 2008) stay apart under the common
colour-vision deficiencies, so prefill (blue) and decode (orange) read as two things to
everyone. The dashboard gets these exact values from the server (`/static/palette.js`), so a
phase has one colour wherever it is drawn.
"""

from __future__ import annotations

#: Okabe-Ito, in the order series take them (black last: it is kept for ceilings and medians)
SERIES = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
GREY = "#999999"
BLUE, ORANGE, GREEN, VERMILLION, PURPLE = SERIES[:5]
#: a run's phases, wherever they are drawn (timeline, layers, sweeps, roofline)
PHASES = {"load": GREY, "to_device": "#BBBBBB", "prefill": SERIES[0], "decode": SERIES[1]}
#: the parts of a decoder block; "rest" is the block's time outside its timed parts
PARTS = {
    "attention": SERIES[0],
    "mlp": SERIES[1],
    "moe": SERIES[3],
    "mixer": SERIES[4],
    "norm": SERIES[2],
    "rest": "#BBBBBB",
}
#: a sample marked as an outlier (kept, never dropped) and a confirmed change point
ALERT = SERIES[3]


def as_json() -> dict[str, object]:
    """The palette as the dashboard reads it."""
    return {"series": list(SERIES), "grey": GREY, "phases": PHASES, "parts": PARTS, "alert": ALERT}
