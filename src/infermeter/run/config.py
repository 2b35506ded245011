"""`RunConfig`: everything that defines one profiled configuration, validated before it runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypedDict, cast

from infermeter.errors import UserError
from infermeter.instrument.config import MODES
from infermeter.models.presets import DEFAULT_PRESET
from infermeter.run.load_docs import LoadSpecDoc
from infermeter.util.settings import Range, check_ranges, setting, settings_of
from infermeter.workloads.corpus import PROMPT_KINDS
from infermeter.workloads.decoding import CACHE_FORMS, parse_decoding

ENERGY_CHOICES = ("auto", "nvml", "rapl", "powermetrics", "off")


def field_help(name: str) -> str:
    """The help text of RunConfig field `name` (KeyError for a field that is no setting)."""
    return settings_of(RunConfig)[name].help


class InterleavedDoc(TypedDict):
    """An interleaved arm's place: the group its samples were paired in, and how many arms."""

    group: str
    arms: int


class RunConfigDoc(TypedDict, total=False):
    """A run's `config` as stored and as `RunResult.config` holds it.

    RunConfig's settings as JSON keeps them (user prompts by count, SLOs as pairs), plus what
    a run adds: `interleaved` for an arm of an interleaved run, and `load` for a load run,
    whose config is its model, mode "load", its SLOs and the whole load spec (it has no
    RunConfig). Not total: a run stored by an older release lacks the settings added since,
    and readers use `.get` with the setting's default.
    """

    model: str
    prompt_tokens: int | None
    new_tokens: int
    batch_size: int
    samples: int
    warmup: int
    dtype: str
    device: str
    threads: int | None
    compile: bool | str
    nvtx: bool
    attn_implementation: str | None
    decoding: str
    temperature: float
    top_p: float
    sample_top_k: int | None
    chat: bool
    cache: str
    prompt_kind: str
    prompts_file: str | None
    prompts_count: int | None
    prompts_source: str | None
    seed: int
    mode: str
    sample_every: int
    layers: Sequence[int] | None
    energy: str
    power_interval_ms: float
    grid_g_per_kwh: float | None
    slos: list[list[str | float]]
    interleaved: InterleavedDoc
    #: a load run's spec (serving/load.py `spec_document`)
    load: LoadSpecDoc


@dataclass(frozen=True)
class RunConfig:
    """One run: model, workload, knob values and profiling mode.

    Attributes:
        model: preset name, "smollm2-135m", a local folder or a Hugging Face id.
        prompt_tokens: exact prompt length per row (chat template included); None uses whole
            built-in (or file) prompts.
        new_tokens: tokens generated per row, exactly (EOS is suppressed until then).
        samples: measured repetitions; warmup: unmeasured ones before them.
        compile: wrap the forward in torch.compile (first call cold, reported apart): True
            for torch's default mode, or a mode name ("reduce-overhead": CUDA graphs;
            "max-autotune"; "default").
        nvtx: NVTX ranges per sample, phase, block and part for Nsight Systems (CUDA only).
        threads: torch's CPU threads for the run (None: torch's own); put back after it.
        decoding: "greedy" or "sampling" (with temperature, top_p, sample_top_k), or a
            speculative kind verified greedily: "prompt_lookup:N", "assisted:DRAFT",
            "early_exit:K" (workloads/decoding.py).
        chat: use the tokenizer's chat template when it has one.
        mode: profiling mode, "minimal" (no hooks), "standard" or "deep".
        sample_every: in standard/deep mode, instrument one decode step in N.
        layers: in standard/deep mode, instrument only these blocks (a custom profile).
        energy: energy sources, "auto" (all this machine has), "nvml", "rapl", "powermetrics"
            or "off"; a named source that is missing is an error.
        power_interval_ms: how often the power sampler reads the sources (10 ms minimum).
        grid_g_per_kwh: grid carbon intensity; when given, grams of CO2 are reported.
        slos: (metric, bound) pairs (`ttft_ms`, `tpot_ms`, `e2e_ms` = the call's total):
            each sample's rows pass or fail, the summary gets attainment and goodput.
    """

    model: str = setting(
        DEFAULT_PRESET,
        option="--model",
        help="Preset, smollm2-135m or gemma3-270m, local folder or Hugging Face id.",
    )
    prompt_tokens: int | None = setting(
        None,
        option="--prompt-tokens",
        help="Exact prompt length in tokens (default: whole built-in prompts).",
        within=Range(1, 10_000_000),
    )
    new_tokens: int = setting(
        32,
        option="--new-tokens",
        help="Tokens generated per row, exactly.",
        within=Range(1, 1_000_000),
    )
    batch_size: int = setting(
        1, option="--batch-size", help="Rows per generate call.", within=Range(1, 65_536)
    )
    samples: int = setting(
        5, option="--samples", help="Measured repetitions.", within=Range(1, 100_000)
    )
    warmup: int = setting(
        1, option="--warmup", help="Unmeasured repetitions first.", within=Range(0, 10_000)
    )
    dtype: str = setting(
        "auto",
        option="--dtype",
        help="auto, float32, bfloat16, float16; int8, int4 (int4-g64, int4-g32) or fp8 (GPU) "
        "quantize the weights.",
    )
    device: str = setting("auto", option="--device", help="auto, cpu, cuda, cuda:N or mps.")
    threads: int | None = setting(
        None,
        option="--threads",
        help="torch's CPU threads for the run (default: torch's own, one per core). Fewer than "
        "the cores leaves the rest to other work: a measurement beside other processes is "
        "quieter with only the free cores.",
        within=Range(1, 4096),
    )
    compile: bool | str = False
    nvtx: bool = setting(
        False,
        option="--nvtx",
        help="NVTX ranges per sample, phase, block and part, named as the tables, for an Nsight "
        "Systems timeline (nsys profile --trace=cuda,nvtx). CUDA only.",
    )
    attn_implementation: str | None = setting(
        None, option="--attn", help="Attention implementation: eager, sdpa, ..."
    )
    decoding: str = setting(
        "greedy",
        option="--decoding",
        help="greedy, sampling, or speculative: prompt_lookup:N, assisted:DRAFT, early_exit:K.",
    )
    temperature: float = setting(
        1.0,
        option="--temperature",
        help="Sampling temperature.",
        within=Range(0, 1_000, open_low=True),
    )
    top_p: float = setting(
        1.0, option="--top-p", help="Sampling nucleus (top-p).", within=Range(0, 1, open_low=True)
    )
    sample_top_k: int | None = setting(
        None,
        option="--sample-top-k",
        help="Sampling top-k (not the MoE top-k).",
        within=Range(1, 1_000_000),
    )
    chat: bool = setting(
        True, option="--chat", help="Use the tokenizer's chat template when it has one."
    )
    cache: str = setting(
        "dynamic",
        option="--cache",
        help="The KV cache's form: dynamic, static, quantized (4-bit, optimum-quanto), offloaded "
        "(GPU to CPU memory), sliding_window (models that have one).",
    )
    prompt_kind: str = setting(
        "natural",
        option="--prompt-kind",
        help="natural (the built-in corpus) or repetitive (its passages said four times over, as "
        "code under edit is: what prompt lookup feeds on).",
    )
    prompts_file: str | None = setting(
        None,
        option="--prompts",
        help="Prompts file: .txt one per line or .jsonl with a 'prompt' field.",
    )
    prompts: tuple[str, ...] | None = field(default=None, repr=False)
    #: where `prompts` came from when not a file ("workload sharegpt:...", "dataset wikitext")
    prompts_source: str | None = None
    seed: int = setting(
        0,
        option="--seed",
        help="Seeds weights of presets, prompt choice, sampling.",
        within=Range(0, 2**32 - 1),
    )
    mode: str = setting(
        "minimal",
        option="--mode",
        help="minimal (no hooks: within noise), standard (per-layer times, activation "
        "statistics: TPOT +3%, TTFT +2-5%) or deep (plus attention operations, entropy, kill "
        "ratios, MoE routing: TPOT +6-7%, TTFT +30-32%); costs measured on smollm2-135m, CPU.",
    )
    sample_every: int = setting(
        1,
        option="--sample-every",
        help="standard/deep: instrument one decode step in N.",
        within=Range(1, 1_000_000),
    )
    layers: tuple[int, ...] | None = setting(
        None, option="--layers", help="standard/deep: only these blocks, e.g. 0,5,29."
    )
    energy: str = setting(
        "auto",
        option="--energy",
        help="Energy sources: auto (all this machine has), nvml, rapl, powermetrics or off. "
        "A named source that is missing is an error.",
    )
    power_interval_ms: float = setting(
        100.0,
        option="--power-interval-ms",
        help="How often the power sampler reads the sources (ms, 10 minimum).",
        within=Range(10, 60_000, unit="ms"),
    )
    grid_g_per_kwh: float | None = setting(
        None,
        option="--grid-intensity",
        help="Grid carbon intensity in g CO2/kWh; reports grams of CO2 when given.",
        within=Range(0, 10_000, unit="g CO2/kWh"),
    )
    slos: tuple[tuple[str, float], ...] = setting(
        (),
        option="--slo",
        help="ttft_ms=500, tpot_ms=80 or e2e_ms=2000 (repeatable): attainment and goodput over "
        "the samples.",
    )

    def _check_kinds(self) -> None:
        """Values of the wrong kind: a compile mode torch lacks, a NaN or infinite number."""
        from infermeter.knobs.compile import COMPILE_MODES  # (the knobs load the model loader)

        if not (isinstance(self.compile, bool) or self.compile in COMPILE_MODES):
            modes = ", ".join(COMPILE_MODES)
            raise UserError(f"unknown torch.compile mode {self.compile!r}", f"use one of {modes}")
        for name in ("temperature", "top_p", "power_interval_ms", "grid_g_per_kwh"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise UserError(f"{name} {value} is not a finite number", "give a finite number")

    def validate(self) -> RunConfig:
        """Raise UserError for any value that cannot run; return self for chaining.

        Ranges are the fields' own (`check_ranges`); the checks here are of choices and of one
        setting against another, one (condition, problem, fix) row each.
        """
        from infermeter.run.slo import check_slos

        check_slos(self.slos)
        self._check_kinds()
        check_ranges(self)
        checks = [
            (self.mode in MODES, f"unknown mode {self.mode!r}", f"use one of {', '.join(MODES)}"),
            (
                self.layers is None or (self.mode != "minimal" and min(self.layers) >= 0),
                f"--layers {self.layers} needs --mode standard or deep and indices >= 0",
                "add --mode standard, or leave --layers out",
            ),
            (
                self.cache in CACHE_FORMS,
                f"unknown cache form {self.cache!r}",
                f"use one of {', '.join(CACHE_FORMS)}",
            ),
            (
                self.prompt_kind in PROMPT_KINDS,
                f"unknown prompt kind {self.prompt_kind!r}",
                f"use one of {', '.join(PROMPT_KINDS)}",
            ),
            (
                not parse_decoding(self.decoding).speculative or self.batch_size == 1,
                f"decoding {self.decoding} runs one sequence at a time, not a batch of "
                f"{self.batch_size} (transformers' assisted generation)",
                "use --batch-size 1 with speculative decoding",
            ),
            (
                self.energy in ENERGY_CHOICES,
                f"--energy {self.energy!r} is not a source",
                f"use one of {', '.join(ENERGY_CHOICES)}",
            ),
        ]
        for ok, problem, fix in checks:
            if not ok:
                raise UserError(problem, fix)
        return self

    @property
    def warmup_effective(self) -> int:
        """Warm-up samples actually run: compile needs one to pay its cold first call."""
        return max(self.warmup, 1) if self.compile else self.warmup

    def to_dict(self) -> RunConfigDoc:
        """The run's stored `config` (user prompts summarised by count).

        Every field but `prompts` under its own name (tests/run/test_config_doc.py holds the
        document's keys to the fields).
        """
        d = asdict(self)
        prompts = d.pop("prompts")
        d["prompts_count"] = len(prompts) if prompts else None
        d["slos"] = [list(p) for p in self.slos]  # as JSON keeps them
        return cast(RunConfigDoc, d)

    @classmethod
    def from_doc(cls, doc: RunConfigDoc) -> RunConfig | None:
        """Inverse of `to_dict`: None for a load run's config (a load spec, no RunConfig).

        A setting the document lacks (a run stored before it existed) takes its default;
        user prompts, kept by count only, come back as None.
        """
        if doc.get("mode") == "load" or "load" in doc:
            return None
        known = {f.name for f in fields(cls)} - {"prompts"}
        kept: dict[str, Any] = {k: v for k, v in doc.items() if k in known}  # read, then typed
        if kept.get("layers") is not None:
            kept["layers"] = tuple(kept["layers"])
        kept["slos"] = tuple((str(m), float(b)) for m, b in doc.get("slos") or [])
        return cls(**kept)

    def knob_values(self) -> dict[str, int | str | bool | None]:
        """The values a sweep turns, as the `config` object of summary rows (docs/design.md)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "batch_size": self.batch_size,
            "dtype": self.dtype,
            "compile": self.compile,
            "attn_implementation": self.attn_implementation,
            "decoding": self.decoding,
            "prompt_kind": self.prompt_kind,
            "cache": self.cache,
            "mode": self.mode,
        }


#: the settings a run's label names when they differ from RunConfig's defaults (knob values are
#: named always): what tells two runs of one model apart in a list
LABEL_SETTINGS = (
    "prompt_tokens",
    "new_tokens",
    "batch_size",
    "dtype",
    "compile",
    "attn_implementation",
    "decoding",
)


def run_label(
    config: dict[str, Any], knobs: dict[str, Any], swept: tuple[str, ...] | list[str] = ()
) -> dict[str, Any]:
    """What tells a run apart: swept knobs, model knobs, each setting off its default.

    `swept`: the knobs the run's sweep turned. A run's stored knobs also repeat its config
    (prompt_tokens, dtype, ...), so those count only when swept or off their default. Before,
    two points of a sweep that differed in prompt_tokens both read "(minimal, top_k=8)", and
    precision, batch and compile points read no knobs at all.
    """
    defaults = {f: getattr(RunConfig, f) for f in LABEL_SETTINGS}
    out = {k: v for k, v in knobs.items() if k in swept or k not in config}
    for name in LABEL_SETTINGS:
        value = config.get(name)
        if name not in out and value is not None and value != defaults[name]:
            out[name] = value
    return out
