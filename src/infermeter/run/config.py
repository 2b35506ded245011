"""`RunConfig`: everything that defines one profiled configuration, validated before it runs."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from infermeter.errors import UserError
from infermeter.instrument.config import MODES
from infermeter.models.presets import DEFAULT_PRESET
from infermeter.workloads.corpus import PROMPT_KINDS
from infermeter.workloads.decoding import CACHE_FORMS, parse_decoding

ENERGY_CHOICES = ("auto", "nvml", "rapl", "powermetrics", "off")


#: The largest value each setting may take (field -> (option, maximum)). Far beyond any real
#: run, they stop a typo from allocating a buffer per token or per sample of 10^14 entries
#: before anything else could refuse it.
MAXIMA: dict[str, tuple[str, float]] = {
    "new_tokens": ("--new-tokens", 1_000_000),
    "batch_size": ("--batch-size", 65_536),
    "samples": ("--samples", 100_000),
    "warmup": ("--warmup", 10_000),
    "prompt_tokens": ("--prompt-tokens", 10_000_000),
    "sample_every": ("--sample-every", 1_000_000),
    "sample_top_k": ("--sample-top-k", 1_000_000),
    "temperature": ("--temperature", 1_000),
    "power_interval_ms": ("--power-interval-ms", 60_000),
    "grid_g_per_kwh": ("--grid-intensity", 10_000),
}


def _field(default: Any, help_text: str) -> Any:
    """A field with its one help text, which the CLI's options take (`cli/options.py`)."""
    return field(default=default, metadata={"help": help_text})


def field_help(name: str) -> str:
    """The help text of RunConfig field `name` (KeyError for a field without one)."""
    from dataclasses import fields

    return str({f.name: f.metadata for f in fields(RunConfig)}[name]["help"])


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

    model: str = _field(
        DEFAULT_PRESET, "Preset, smollm2-135m or gemma3-270m, local folder or Hugging Face id."
    )
    prompt_tokens: int | None = _field(
        None, "Exact prompt length in tokens (default: whole built-in prompts)."
    )
    new_tokens: int = _field(32, "Tokens generated per row, exactly.")
    batch_size: int = _field(1, "Rows per generate call.")
    samples: int = _field(5, "Measured repetitions.")
    warmup: int = _field(1, "Unmeasured repetitions first.")
    dtype: str = _field(
        "auto",
        "auto, float32, bfloat16, float16; int8, int4 (int4-g64, int4-g32) or fp8 (GPU) "
        "quantize the weights.",
    )
    device: str = _field("auto", "auto, cpu, cuda, cuda:N or mps.")
    compile: bool | str = False
    nvtx: bool = False
    attn_implementation: str | None = None
    decoding: str = _field(
        "greedy",
        "greedy, sampling, or speculative: prompt_lookup:N, assisted:DRAFT, early_exit:K.",
    )
    temperature: float = _field(1.0, "Sampling temperature.")
    top_p: float = _field(1.0, "Sampling nucleus (top-p).")
    sample_top_k: int | None = _field(None, "Sampling top-k (not the MoE top-k).")
    chat: bool = _field(True, "Use the tokenizer's chat template when it has one.")
    cache: str = _field(
        "dynamic",
        "The KV cache's form: dynamic, static, quantized (4-bit, optimum-quanto), offloaded "
        "(GPU to CPU memory), sliding_window (models that have one).",
    )
    prompt_kind: str = _field(
        "natural",
        "natural (the built-in corpus) or repetitive (its passages said four times over, as "
        "code under edit is: what prompt lookup feeds on).",
    )
    prompts_file: str | None = None
    prompts: tuple[str, ...] | None = field(default=None, repr=False)
    #: where `prompts` came from when not a file ("workload sharegpt:...", "dataset wikitext")
    prompts_source: str | None = None
    seed: int = _field(0, "Seeds weights of presets, prompt choice, sampling.")
    mode: str = _field(
        "minimal",
        "minimal (no hooks: within noise), standard (per-layer times, activation "
        "statistics: TPOT +3%, TTFT +2-5%) or deep (plus attention operations, entropy, kill "
        "ratios, MoE routing: TPOT +6-7%, TTFT +30-32%); costs measured on smollm2-135m, CPU.",
    )
    sample_every: int = _field(1, "standard/deep: instrument one decode step in N.")
    layers: tuple[int, ...] | None = None
    energy: str = _field(
        "auto",
        "Energy sources: auto (all this machine has), nvml, rapl, powermetrics or off. "
        "A named source that is missing is an error.",
    )
    power_interval_ms: float = _field(
        100.0, "How often the power sampler reads the sources (ms, 10 minimum)."
    )
    grid_g_per_kwh: float | None = _field(
        None, "Grid carbon intensity in g CO2/kWh; reports grams of CO2 when given."
    )
    slos: tuple[tuple[str, float], ...] = ()

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

        Long because: every setting's check is one (condition, problem, fix) row of one list,
        read together.
        """
        from infermeter.run.slo import check_slos

        check_slos(self.slos)
        self._check_kinds()
        checks = [
            (self.new_tokens >= 1, f"--new-tokens {self.new_tokens} is below 1", "use 1 or more"),
            (
                self.batch_size >= 1,
                f"batch size {self.batch_size} is below 1",
                "use --batch-size 1 or more",
            ),
            (self.samples >= 1, f"--samples {self.samples} is below 1", "use 1 or more"),
            (self.warmup >= 0, f"--warmup {self.warmup} is negative", "use 0 or more"),
            (
                self.prompt_tokens is None or self.prompt_tokens >= 1,
                f"--prompt-tokens {self.prompt_tokens} is below 1",
                "use 1 or more, or leave it out for whole prompts",
            ),
            (self.mode in MODES, f"unknown mode {self.mode!r}", f"use one of {', '.join(MODES)}"),
            (
                0 <= self.seed < 2**32,
                f"--seed {self.seed} is outside 0..{2**32 - 1}",
                "use a seed from 0 to 4294967295",
            ),
            (
                self.layers is None or (self.mode != "minimal" and min(self.layers) >= 0),
                f"--layers {self.layers} needs --mode standard or deep and indices >= 0",
                "add --mode standard, or leave --layers out",
            ),
            (
                self.sample_every >= 1,
                f"--sample-every {self.sample_every} is below 1",
                "use 1 (every decode step) or more",
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
            (self.temperature > 0, f"temperature {self.temperature} is not > 0", "use e.g. 0.7"),
            (0 < self.top_p <= 1, f"top-p {self.top_p} is outside (0, 1]", "use e.g. 0.9"),
            (
                self.sample_top_k is None or self.sample_top_k >= 1,
                f"sampling top-k {self.sample_top_k} is below 1",
                "use 1 or more",
            ),
            (
                self.energy in ENERGY_CHOICES,
                f"--energy {self.energy!r} is not a source",
                f"use one of {', '.join(ENERGY_CHOICES)}",
            ),
            (
                self.power_interval_ms >= 10,
                f"--power-interval-ms {self.power_interval_ms} is below the minimum of 10 ms",
                "use 10 ms or more (100 ms is the default)",
            ),
            (
                self.grid_g_per_kwh is None or self.grid_g_per_kwh >= 0,
                f"--grid-intensity {self.grid_g_per_kwh} g/kWh is negative",
                "give the grid's carbon intensity in g CO2 per kWh, e.g. 400",
            ),
        ]
        for name, (flag, most) in MAXIMA.items():
            value = getattr(self, name)
            checks.append(
                (
                    value is None or value <= most,
                    f"{flag} {value} is above the maximum of {most:,}",
                    f"use at most {most:,}",
                )
            )
        for ok, problem, fix in checks:
            if not ok:
                raise UserError(problem, fix)
        return self

    @property
    def warmup_effective(self) -> int:
        """Warm-up samples actually run: compile needs one to pay its cold first call."""
        return max(self.warmup, 1) if self.compile else self.warmup

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON and the store (user prompts summarised by count)."""
        d = asdict(self)
        prompts = d.pop("prompts")
        d["prompts_count"] = len(prompts) if prompts else None
        d["slos"] = [list(p) for p in self.slos]  # as JSON keeps them
        return d

    def knob_values(self) -> dict[str, Any]:
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
