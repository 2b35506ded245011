"""Per-layer tables from raw profiler records: what `Profiler.result()` returns.

Raw records are kept (module, step, start, duration); every table is computed from them with
pandas, so nothing measured is lost in aggregation. "% of forward" divides by the time of the
model's forward calls in the same phase; "other" is forward time inside no timed top-level
module (embeddings, rotary position tables, blocks, final norm, LM head, vision tower,
projector): Python glue, cache updates, mask building, hooks' own cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from infermeter.instrument.packing import PackedRecords
    from infermeter.instrument.probes import (
        ActivationRowDoc,
        AttentionHeadRowDoc,
        AttentionRowDoc,
        KillRowDoc,
        RoutingRowDoc,
    )
    from infermeter.measure.timer import SectionRowDoc

#: Modules called directly by the model's forward (their sum plus "other" is the forward time).
TOP_LEVEL = (
    "embeddings",
    "rotary",
    "block",
    "final_norm",
    "lm_head",
    "vision_tower",
    "projector",
)
#: Parts inside a block, in display order.
BLOCK_PARTS = (
    "attention",
    "mlp",
    "moe",
    "mixer",
    "norm",
    "o_proj",
    "router",
    "qk",
    "softmax",
    "av",
)
#: generate's own work between forwards, timed from the forward's and the token's marks:
#: logits processing and token choice after a forward, step preparation before the next.
GENERATE_PARTS = ("choose_token", "prepare_step")
#: The part each part is timed inside (deep mode's operations inside attention, the router
#: inside the MoE block, generate's parts outside the forward); the rest are inside the forward.
PARENT = {
    **{k: "forward" for k in TOP_LEVEL},
    "other": "forward",
    **{k: "block" for k in ("attention", "mlp", "moe", "mixer", "norm")},
    **{k: "attention" for k in ("o_proj", "qk", "softmax", "av")},
    "router": "moe",
    **{k: "outside forward" for k in GENERATE_PARTS},
}
#: What a parent's time outside its timed children is, row name -> explanation.
REST = {
    "block": "rest of the block: residual adds and glue between its parts",
    "attention": "rest of attention: q/k/v projections, rotary, reshapes, masking",
    "moe": "rest of the MoE: experts, dispatch and combine",
}


class LayerRowDoc(TypedDict):
    """A timed module in a phase (`layers`): its calls, time, and share of the forward.

    Stored rows hold None where the frame held NaN (a phase whose forward was not timed).
    """

    name: str
    #: the module's part kind: block, attention, mlp, ..., or a top-level part (TOP_LEVEL)
    kind: str
    #: the decoder block; None outside the blocks
    layer: int | None
    phase: str
    calls: int
    total_ms: float
    mean_ms: float
    pct_forward: float | None
    #: each generate call's total in this module and phase: the distribution `compare` judges
    sample_ms: list[float]


class PartRowDoc(TypedDict):
    """A part type in a phase (`parts`), with its share of the forward and of its parent.

    "rest of ..." rows (a parent's time outside its timed children) and "other" have no calls.
    """

    phase: str
    part: str
    parent: str | None
    calls: int | None
    total_ms: float
    mean_ms: float | None
    pct_forward: float | None
    pct_parent: float | None


class MoeLoadRowDoc(TypedDict):
    """A MoE layer's balance over its experts in a phase (`moe_load`)."""

    phase: str
    layer: int
    assignments: int
    max_share: float
    min_share: float
    #: busiest share / mean share: 1.0 is perfectly even
    imbalance: float
    #: nats, beside its maximum log(experts)
    load_entropy: float
    max_entropy: float


_PART_COLUMNS = [
    "phase",
    "part",
    "parent",
    "calls",
    "total_ms",
    "mean_ms",
    "pct_forward",
    "pct_parent",
]


def _row(
    phase: str, part: str, calls: int | None, total: float, mean: float | None, fwd: float | None
) -> PartRowDoc:
    return {
        "phase": phase,
        "part": part,
        "parent": PARENT.get(part),
        "calls": calls,
        "total_ms": total,
        "mean_ms": mean,
        "pct_forward": 100.0 * total / fwd if fwd else float("nan"),
        "pct_parent": float("nan"),
    }


def nest_parts(rows: list[PartRowDoc]) -> list[PartRowDoc]:
    """Each part's share of its parent, and a "rest of" row per parent with timed children.

    So the shares add to 100% at every level: forward = top-level parts + other; block =
    its parts + the rest of the block; attention = deep mode's operations + the rest.
    """
    out = []
    for phase in dict.fromkeys(r["phase"] for r in rows):
        mine = [r.copy() for r in rows if r["phase"] == phase]
        total = {r["part"]: r["total_ms"] for r in mine}
        forward = total.get("forward")
        for parent, why in REST.items():
            children = [r for r in mine if r["parent"] == parent]
            if parent in total and children:
                rest = total[parent] - sum(r["total_ms"] for r in children)
                row = _row(phase, why.split(":")[0], None, rest, None, forward)
                row["parent"] = parent
                mine.append(row)
        for r in mine:
            above = r["parent"]
            base = total.get(above) if above else r["total_ms"]
            r["pct_parent"] = 100.0 * r["total_ms"] / base if base else float("nan")
        out += mine
    return out


@dataclass(frozen=True)
class ModuleInfo:
    """An instrumented module (or attention operation)."""

    mid: int
    name: str
    kind: str
    layer: int | None


@dataclass(frozen=True)
class StepInfo:
    """One forward call of the model: its phase and whether it was instrumented."""

    step: int
    phase: str
    decode_index: int | None
    measured: bool


@dataclass
class LayerProfile:
    """Everything one profiling session measured, with tables as DataFrames."""

    config: Any
    modules: list[ModuleInfo]
    steps: list[StepInfo]
    records: tuple[list[int], list[int], list[float], list[float]]
    activations: list[ActivationRowDoc] = field(default_factory=list)
    attention: list[AttentionRowDoc] = field(default_factory=list)
    #: the same statistics for each head of each layer
    attention_heads: list[AttentionHeadRowDoc] = field(default_factory=list)
    kill: list[KillRowDoc] = field(default_factory=list)
    routing: list[RoutingRowDoc] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    num_layers: int = 0
    #: user regions (`Profiler.section`), one row per call: name, depth, thread, start_ms, ms
    sections: list[SectionRowDoc] = field(default_factory=list)

    def __repr__(self) -> str:
        """One line: what was measured, not every raw record."""
        sections = len({r["name"] for r in self.sections})
        return (
            f"LayerProfile(mode={getattr(self.config, 'mode', None)!r}, "
            f"modules={len(self.modules)}, steps={len(self.steps)}, "
            f"records={len(self.records[0])}, sections={sections}, "
            f"tables={sorted(self.tables())})"
        )

    def records_frame(self) -> pd.DataFrame:
        """One row per timed call: module, kind, layer, step, phase, sample, start_ms, ms.

        `sample` numbers the generate calls the profiler saw (0, 1, ...): a call starts at
        a vision step, or at a prefill step that does not follow one.
        """
        mids, steps, starts, durs = self.records
        df = pd.DataFrame({"mid": mids, "step": steps, "start_ms": starts, "ms": durs})
        mods = pd.DataFrame([m.__dict__ for m in self.modules])
        st = pd.DataFrame([s.__dict__ for s in self.steps])
        if df.empty or mods.empty or st.empty:
            cols = ["mid", "step", "start_ms", "ms", "name", "kind", "layer", "phase", "sample"]
            return pd.DataFrame(columns=cols)
        st = st.sort_values("step")
        after_vision = st["phase"].shift(1, fill_value="") == "vision"
        opening = (st["phase"] == "vision") | ((st["phase"] == "prefill") & ~after_vision)
        st["sample"] = opening.cumsum() - 1
        df = df.merge(mods, on="mid", how="left").merge(
            st[["step", "phase", "decode_index", "sample"]], on="step", how="left"
        )
        return df

    def forward_ms(self) -> dict[str, float]:
        """Total time of the model's forward calls per phase (instrumented steps only)."""
        df = self.records_frame()
        fwd = df[df["kind"] == "forward"]
        return {str(k): float(v) for k, v in fwd.groupby("phase")["ms"].sum().items()}

    def layers(self) -> pd.DataFrame:
        """Per module and phase: calls, total, mean per call and % of the forward."""
        df = self.records_frame()
        df = df[df["kind"] != "forward"]
        if df.empty:
            return pd.DataFrame(
                columns=[
                    "name",
                    "kind",
                    "layer",
                    "phase",
                    "calls",
                    "total_ms",
                    "mean_ms",
                    "pct_forward",
                    "sample_ms",
                ]
            )
        g = (
            df.groupby(["mid", "name", "kind", "phase"], dropna=False)
            .agg(
                layer=("layer", "first"),
                calls=("ms", "size"),
                total_ms=("ms", "sum"),
                mean_ms=("ms", "mean"),
            )
            .reset_index()
        )
        fwd = self.forward_ms()
        g["pct_forward"] = [
            100.0 * t / fwd[p] if fwd.get(p) else float("nan")
            for t, p in zip(g["total_ms"], g["phase"], strict=True)
        ]
        # each generate call's total per module and phase: the distribution compare judges
        per_sample = df.groupby(["mid", "phase", "sample"])["ms"].sum()
        g["sample_ms"] = [
            [round(float(x), 6) for x in per_sample.loc[(m, p)].tolist()]
            for m, p in zip(g["mid"], g["phase"], strict=True)
        ]
        g = g.sort_values(["phase", "mid"], ascending=[False, True])
        return g.drop(columns="mid").reset_index(drop=True)

    def parts(self) -> pd.DataFrame:
        """Per part type and phase: total, mean per call, % of forward; with "other".

        Phases: "vision" (a VLM's image encoding, which `generate` runs before the first
        forward), "prefill" and "decode". "other" and "forward" rows exist where the model's
        forward was timed.
        """
        df = self.records_frame()
        fwd = self.forward_ms()
        rows = []
        for phase in ("vision", "prefill", "decode"):
            sub = df[df["phase"] == phase]
            if sub.empty:
                continue
            forward = fwd.get(phase)
            top_total = 0.0
            for kind in (*TOP_LEVEL, *BLOCK_PARTS, *GENERATE_PARTS):
                k = sub[sub["kind"] == kind]["ms"]
                if k.empty:
                    continue
                if kind in TOP_LEVEL:
                    top_total += float(k.sum())
                rows.append(self._part_row(phase, kind, k, forward))
            if forward:
                calls = int((sub["kind"] == "forward").sum())
                other = forward - top_total
                rows.append(_row(phase, "other", None, other, None, forward))
                rows.append(_row(phase, "forward", calls, forward, forward / calls, forward))
        return pd.DataFrame(nest_parts(rows), columns=_PART_COLUMNS)

    @staticmethod
    def _part_row(phase: str, kind: str, ms: pd.Series, forward: float | None) -> PartRowDoc:
        """One part's row (before `_nest` adds the shares of its parent)."""
        return _row(phase, kind, int(ms.size), float(ms.sum()), float(ms.mean()), forward)

    def activations_frame(self) -> pd.DataFrame:
        """Per layer and phase: mean |x|, std, max |x|, sparsity of the block output."""
        return pd.DataFrame(self.activations)

    def attention_frame(self) -> pd.DataFrame:
        """Per layer and phase: entropy, sparsity, and QK^T / softmax / AV / o_proj mean ms."""
        att = pd.DataFrame(self.attention)
        if att.empty:
            return att
        lay = self.layers()
        ops = lay[lay["kind"].isin(["qk", "softmax", "av", "o_proj"])]
        if not ops.empty:
            wide = ops.pivot_table(index=["layer", "phase"], columns="kind", values="mean_ms")
            wide.columns = [f"{c}_ms" for c in wide.columns]
            att = att.merge(wide.reset_index(), on=["layer", "phase"], how="left")
        return att

    def kill_frame(self) -> pd.DataFrame:
        """Per layer and phase: fraction of post-activation values at or below kill_eps."""
        return pd.DataFrame(self.kill)

    def routing_frame(self) -> pd.DataFrame:
        """Per layer, phase and expert: tokens routed there and their share."""
        return pd.DataFrame(self.routing)

    def moe_load_frame(self) -> pd.DataFrame:
        """Per layer and phase: routed tokens, busiest and idlest expert share, and balance.

        imbalance = busiest share / mean share (1.0 is perfectly even); load entropy in nats,
        beside its maximum log(experts).
        """
        r = self.routing_frame()
        if r.empty:
            return r
        rows = []
        for (phase, layer), g in r.groupby(["phase", "layer"], sort=False):
            share = g["share"].to_numpy()
            nz = share[share > 0]
            rows.append(
                {
                    "phase": phase,
                    "layer": int(layer),
                    "assignments": int(g["tokens"].sum()),
                    "max_share": float(share.max()),
                    "min_share": float(share.min()),
                    "imbalance": float(share.max() * len(share)),
                    "load_entropy": float(-(nz * np.log(nz)).sum()),
                    "max_entropy": float(np.log(len(share))),
                }
            )
        return pd.DataFrame(rows)

    def packed_trace(self) -> PackedRecords:
        """Raw records packed for storage and trace export (see `instrument.packing`)."""
        from infermeter.instrument.packing import pack

        mids, _steps, starts, durs = self.records
        tag, blob = pack(mids, starts, durs)
        return {
            "dtype": tag,
            "records": blob,
            "count": len(mids),
            "modules": [[m.name, m.kind, m.layer] for m in self.modules],
        }

    def sections_frame(self) -> pd.DataFrame:
        """One row per user region call (`Profiler.section`), on the records' timeline."""
        return pd.DataFrame(self.sections, columns=["name", "depth", "thread", "start_ms", "ms"])

    def section_summary(self) -> pd.DataFrame:
        """Per user region: calls, total, median with its 95% interval, mean, spread."""
        from infermeter.measure.timer import section_summary

        return pd.DataFrame(section_summary(self.sections))

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every non-empty table by name (`sections`: one row per user region call)."""
        out = {
            "layers": self.layers(),
            "parts": self.parts(),
            "activations": self.activations_frame(),
            "attention": self.attention_frame(),
            "attention_heads": pd.DataFrame(self.attention_heads),
            "mlp_kill": self.kill_frame(),
            "moe_routing": self.routing_frame(),
            "moe_load": self.moe_load_frame(),
            "sections": self.sections_frame(),
        }
        return {k: v for k, v in out.items() if not v.empty}
