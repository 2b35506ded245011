"""Weight quantization for the dtype knob: int8 and int4 weights (any device), fp8 (newer GPUs).

Why weight-only: in decode, the step reads every weight once per token, so weight bytes set
its time on memory-bound hardware; halving or quartering them is what INT8 and FP8 buy (the
performance guide's precision table). Activations and the KV cache stay in the compute dtype
(float32 on CPU, bfloat16 on GPU).

How: torchao's `Int8WeightOnlyConfig` / `Float8WeightOnlyConfig` where torchao imports (an
optional extra: `pip install infermeter[quant]`). int4 is torchao's int4 weight-only scheme with
HQQ's scale and zero search, in groups of 128 input features (`int4`, torchao's default) or 64
or 32 (`int4-g64`, `int4-g32`): on CPU its prototype `Int4OpaqueTensor` (PyTorch's tinygemm CPU
kernel, `_weight_int4pack_mm_for_cpu`), on CUDA `Int4TilePackedTo4dTensor` (tinygemm). Both
kernels take bfloat16 activations (with float32 ones the CPU kernel is 1.5x slower than the
float32 model it replaces), so int4 computes in bfloat16 wherever it runs. For int8 without
torchao, on CPU only, PyTorch's
dynamic quantization of linear layers (`torch.ao.quantization.quantize_dynamic`: int8 weights,
activations quantized per call), and the record says which method ran. Every `nn.Linear` but the
output head is converted (its logits decide the tokens); linear layers that transformers does
not build as `nn.Linear` (fused expert tensors of some MoE blocks) stay in the compute dtype,
and the record counts them. `stored_weight_dtypes` reads what the weights really are after the
fact, which is what the knob's verification checks.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from infermeter.errors import UserError
from infermeter.models.info import QuantizationDoc

#: int4 dtype knob values and their group sizes (input features sharing one scale and zero)
INT4_GROUPS = {"int4": 128, "int4-g64": 64, "int4-g32": 32}
#: dtype knob values that quantize weights, and their storage bytes per weight (int4: the
#: packed nibble plus a bfloat16 scale and zero per group)
SCHEMES = {"int8": 1.0, "fp8": 1.0, **{k: 0.5 + 4 / g for k, g in INT4_GROUPS.items()}}
#: modules left in the compute dtype by name (the output head)
KEEP = ("lm_head", "embed_out", "output")


@contextlib.contextmanager
def _quiet_torchao_import() -> Iterator[None]:
    """Silence torchao's import-time warnings.

    torchao logs one warning per optional CUDA kernel library it cannot load (all of them on
    a CPU machine), and torch one for each enum it registers: noise for a user who asked for
    int8 on CPU, where those kernels are not used.
    """
    _drop_enum_notice()
    loggers = [logging.getLogger("torchao")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _is_enum_notice(record: logging.LogRecord) -> bool:
    """False for torch's notice that an Enum need not be registered (torchao's, on import)."""
    return "is an Enum subclass and is now natively supported" not in record.getMessage()


def _drop_enum_notice() -> None:
    """Filter that one notice out of torch's pytree logger, once; every other message stays.

    torchao registers its enums as it imports its parts, some lazily while transformers
    loads a model, so a window around our own import would not catch them all.
    """
    logger = logging.getLogger("torch.utils._pytree")
    if _is_enum_notice not in logger.filters:
        logger.addFilter(_is_enum_notice)


def torchao_quantization() -> Any | None:
    """`torchao.quantization`, or None when torchao is not installed or fails to import."""
    try:
        with _quiet_torchao_import():
            import torchao.quantization as q
    except Exception:  # any import failure means "not available here"
        return None
    return q


def quiet_torchao() -> None:
    """Import torchao, if installed, with its import-time warnings silenced.

    transformers imports it while loading any model when it is installed (its torchao
    quantizer), which would print those warnings before every run.
    """
    import importlib.util

    if importlib.util.find_spec("torchao") is not None:
        torchao_quantization()


def _targets(model: Any) -> tuple[list[str], int]:
    """Names of the linear layers to convert, and how many parameters stay unconverted."""
    import torch

    names = [
        n
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and n.rsplit(".", 1)[-1] not in KEEP
    ]
    converted = sum(model.get_submodule(n).weight.numel() for n in names)
    total = sum(p.numel() for p in model.parameters())
    return names, total - converted


def check_scheme(scheme: str, device: Any) -> None:
    """Refuse a scheme the device or the installed packages cannot run, with the fix."""
    import torch

    dev = torch.device(device)
    if scheme == "fp8":
        if dev.type != "cuda":
            raise UserError(
                "dtype=fp8 needs an NVIDIA GPU (compute capability 8.9 or newer)",
                "use int8 on this device",
            )
        if torch.cuda.get_device_capability(dev) < (8, 9):
            raise UserError(
                f"dtype=fp8 needs compute capability 8.9+ (this GPU: "
                f"{'.'.join(map(str, torch.cuda.get_device_capability(dev)))})",
                "use int8 or bfloat16",
            )
        if torchao_quantization() is None:
            raise UserError("dtype=fp8 needs torchao", "pip install 'infermeter[quant]'")
    if scheme in INT4_GROUPS:
        _check_int4(dev)
    if scheme == "int8" and dev.type != "cpu" and torchao_quantization() is None:
        raise UserError(
            f"dtype=int8 on {dev.type} needs torchao",
            "pip install 'infermeter[quant]', or use --device cpu",
        )


def _check_int4(dev: Any) -> None:
    """int4 needs torchao and the tinygemm kernel of the device's kind."""
    import torch

    if torchao_quantization() is None:
        raise UserError("dtype=int4 needs torchao", "pip install 'infermeter[quant]'")
    if dev.type == "cpu" and not hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu"):
        raise UserError(
            f"dtype=int4 needs PyTorch's int4 CPU kernel (this torch {torch.__version__} has none)",
            "use int8, or a newer torch",
        )
    if dev.type not in ("cpu", "cuda"):
        raise UserError(f"dtype=int4 runs on CPU and NVIDIA GPUs, not {dev.type}", "use int8")
    if dev.type == "cpu":
        try:
            with _quiet_torchao_import():
                from torchao.prototype.quantization.int4 import (  # noqa: F401
                    PrototypeInt4WeightOnlyConfig,
                )
        except ImportError:
            import torchao

            raise UserError(
                f"dtype=int4 on CPU needs torchao's CPU int4 scheme (torchao "
                f"{getattr(torchao, '__version__', '?')} has none)",
                "pip install -U 'torchao>=0.18', or use int8",
            ) from None


def int4_config(group: int, device_type: str) -> Any:
    """The int4 weight-only config of torchao for the device: its CPU prototype, or tinygemm."""
    with _quiet_torchao_import():
        if device_type == "cpu":
            from torchao.prototype.quantization.int4 import PrototypeInt4WeightOnlyConfig

            return PrototypeInt4WeightOnlyConfig(
                group_size=group, int4_choose_qparams_algorithm="hqq"
            )
        from torchao.quantization import Int4WeightOnlyConfig

        return Int4WeightOnlyConfig(
            group_size=group,
            int4_packing_format="tile_packed_to_4d",
            int4_choose_qparams_algorithm="hqq",
        )


def int4_groups(model: Any, names: list[str], scheme: str) -> dict[str, int]:
    """Each layer's int4 group: the scheme's size, or the largest smaller one its width takes.

    Why per layer: SmolLM2's width (576) is no multiple of 128, so groups of 128 alone would
    leave six of its seven linear layers per block in float; they take groups of 64 instead,
    and the record counts the layers per group size. A layer no group divides stays as it is.
    """
    sizes = [g for g in sorted(set(INT4_GROUPS.values()), reverse=True) if g <= INT4_GROUPS[scheme]]
    out: dict[str, int] = {}
    for name in names:
        width = model.get_submodule(name).in_features
        group = next((g for g in sizes if width % g == 0), None)
        if group is not None:
            out[name] = group
    return out


def _quantize_int4(q: Any, model: Any, scheme: str, names: list[str]) -> tuple[str, list[str]]:
    """int4 weights, one torchao pass per group size; (method, converted layer names)."""
    groups = int4_groups(model, names, scheme)
    device_type = next(model.parameters()).device.type
    for group in sorted(set(groups.values()), reverse=True):
        chosen = {n for n, g in groups.items() if g == group}
        with _quiet_torchao_import():
            config = int4_config(group, device_type)
            q.quantize_(model, config, filter_fn=lambda m, fqn, chosen=chosen: fqn in chosen)
    counts = {g: list(groups.values()).count(g) for g in sorted(set(groups.values()))[::-1]}
    per_group = ", ".join(f"{n} in groups of {g}" for g, n in counts.items()) or "none"
    kind = "PrototypeInt4WeightOnlyConfig" if device_type == "cpu" else "Int4WeightOnlyConfig"
    return f"torchao {kind} (HQQ scales; {per_group})", sorted(groups)


def quantize_weights(model: Any, scheme: str) -> QuantizationDoc:
    """Convert the model's linear weights in place; what was done, for the run's record."""
    names, unconverted = _targets(model)
    device = next(model.parameters()).device
    check_scheme(scheme, device)
    keep = set(names)
    q = torchao_quantization()
    if scheme in INT4_GROUPS and q is not None:  # check_scheme refused int4 without torchao
        method, names = _quantize_int4(q, model, scheme, names)
        unconverted += sum(model.get_submodule(n).weight.numel() for n in keep - set(names))
    elif q is not None:
        config = q.Int8WeightOnlyConfig() if scheme == "int8" else q.Float8WeightOnlyConfig()
        with _quiet_torchao_import():  # it imports more of itself on first use
            q.quantize_(model, config, filter_fn=lambda m, fqn: fqn in keep)
        method = f"torchao {type(config).__name__}"
    else:
        import warnings

        import torch
        from torch.ao.quantization import quantize_dynamic

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its deprecation notices name torchao: we know
            quantize_dynamic(
                model,
                {n: torch.ao.quantization.default_dynamic_qconfig for n in names},
                dtype=torch.qint8,
                inplace=True,
            )
        method = "torch.ao quantize_dynamic (int8 weights, activations quantized per call)"
    return {
        "scheme": scheme,
        "method": method,
        "converted_linear": len(names),
        "unconverted_params": unconverted,
        "stored_weight_dtypes": stored_weight_dtypes(model),
    }


def _storage_dtype(weight: Any) -> str:
    """What a weight is stored as: torchao subclasses keep it in `qdata` (int4: packed bytes)."""
    if type(weight).__name__.startswith("Int4"):
        return "int4"
    inner = getattr(weight, "qdata", None)
    dtype = inner.dtype if inner is not None else weight.dtype
    return str(dtype).removeprefix("torch.")


def stored_weight_dtypes(model: Any) -> dict[str, int]:
    """Parameters by the dtype their weights are stored in (quantized modules included).

    A tied weight (the output head sharing the embedding) is one tensor, counted once.
    """
    out: dict[str, int] = {}
    seen: set[int] = set()
    for module in model.modules():
        packed = getattr(module, "_packed_params", None)
        if packed is not None and callable(getattr(module, "weight", None)):
            w = module.weight()  # torch.ao dynamic quantized linear
            key = str(w.dtype).removeprefix("torch.")
            out[key] = out.get(key, 0) + w.numel()
        for p in module.parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            key = _storage_dtype(p)
            out[key] = out.get(key, 0) + p.numel()
    return dict(sorted(out.items()))
