"""The KV cache a run used: its form refused early where it cannot run, and verified after.

What is verified is the cache object the model was given. It reaches the model's forward as a
keyword argument whose name transformers has changed (`past_key_values`, now `cache`), so it
is found by its type (a `transformers.Cache`), not by name. After each sample: the cache's
class, its layers' classes (a sliding-window layer says so), and the bytes its tensors hold
(keys and values, or their quantized form with scales).
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from infermeter.errors import UserError


def _has_quanto() -> bool:
    """Whether optimum-quanto is installed (found without importing it)."""
    if sys.modules.get("optimum.quanto", True) is None:  # hidden (tests do)
        return False
    try:
        return importlib.util.find_spec("optimum.quanto") is not None
    except (ImportError, ValueError):  # no `optimum` at all
        return False


def build_quanto_kernels(device_type: str) -> tuple[float, bool] | None:
    """Load (building on first use) optimum-quanto's CPU kernels now, before any clock runs.

    The 4-bit quantized cache unpacks its keys and values with a C++ extension that quanto
    compiles the first time it is needed, into its own package folder: about 40 s on a
    2-core host, once per environment. Left to the run, that compile fell inside the first
    sample: with `--warmup 0` its decode was 40 s long, a silently wrong number.

    Returns (ms it took, whether it compiled), or None where quanto has no such kernels (a
    GPU's quantized cache goes through other code).
    """
    if device_type != "cpu":
        return None
    import os
    import time

    from optimum.quanto.library.extensions import get_extension

    ext = get_extension("quanto_cpp")
    built = os.path.exists(os.path.join(ext.build_directory, "pytorch_version.txt"))
    start = time.perf_counter()
    ext.lib  # noqa: B018 (the property builds and loads the library)
    return (time.perf_counter() - start) * 1e3, not built


def _layer_kinds(model: Any) -> list[str]:
    """The attention kinds of the model's cache layers, as transformers' caches derive them.

    Mistral's config has no `layer_types`; its `sliding_window` makes every layer a sliding one
    to the cache, which is what the quantized cache refuses.
    """
    text = model.config.get_text_config(decoder=True)
    try:
        from transformers.cache_utils import get_layer_types_and_kwargs

        kinds = get_layer_types_and_kwargs(text)[0]
    except (ImportError, AttributeError, TypeError):  # older transformers: the config's list
        kinds = getattr(text, "layer_types", None) or ["full_attention"]
    return sorted(set(kinds))


def check_cache_form(
    form: str, model: Any, device_type: str, compile_mode: bool | str = False
) -> None:
    """Refuse, in one line with the fix, a cache form this run cannot use.

    `compile_mode` too: CUDA graphs need a cache written in place (knobs/compile.py).
    """
    from infermeter.knobs.compile import check_cuda_graphs

    check_cuda_graphs(compile_mode, form, device_type)
    if form == "quantized" and not _has_quanto():
        raise UserError(
            "--cache quantized needs optimum-quanto (transformers' KV quantization backend "
            "that runs on a CPU; HQQ's builds for CUDA)",
            "pip install optimum-quanto, or use --cache dynamic or static",
        )
    if form == "offloaded" and device_type != "cuda":
        raise UserError(
            f"--cache offloaded moves the KV cache from GPU to CPU memory: this run is on "
            f"{device_type}, with nothing to offload",
            "use it on a GPU, or --cache dynamic or static here",
        )
    text = model.config.get_text_config()
    kinds = _layer_kinds(model)
    if form == "quantized" and kinds != ["full_attention"]:
        raise UserError(
            f"--cache quantized: transformers' quantized cache holds full-attention layers only, "
            f"and {type(model).__name__} has {', '.join(k for k in kinds if k != 'full_attention')}"
            " layers",
            "use --cache dynamic or sliding_window with this model",
        )
    window = getattr(text, "sliding_window", None)
    if form == "sliding_window" and not window:
        raise UserError(
            f"--cache sliding_window: {type(model).__name__} attends to every position (its "
            "configuration has no sliding_window)",
            "use a model with sliding-window layers (Gemma 2/3, Mistral, Qwen3-Next), or "
            "--cache dynamic",
        )


def _is_cache(value: Any) -> bool:
    from transformers.cache_utils import Cache

    return isinstance(value, Cache)


def tensor_bytes(obj: Any, seen: set[int] | None = None, depth: int = 0) -> int:
    """Bytes of every tensor `obj` holds in its attributes (quantized forms included)."""
    import torch

    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 4:
        return 0
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        # a quantized tensor (optimum-quanto's) reports its logical float shape and dtype; what
        # it stores is its inner tensors: packed codes, scales and shifts
        inner = [v for v in getattr(obj, "__dict__", {}).values() if isinstance(v, torch.Tensor)]
        if inner:
            return sum(tensor_bytes(v, seen, depth + 1) for v in inner)
        return int(obj.numel() * obj.element_size())
    if isinstance(obj, list | tuple):
        return sum(tensor_bytes(x, seen, depth + 1) for x in obj)
    if isinstance(obj, dict):
        return sum(tensor_bytes(x, seen, depth + 1) for x in obj.values())
    attrs = getattr(obj, "__dict__", None)
    if attrs is None:
        return 0
    return sum(tensor_bytes(x, seen, depth + 1) for x in attrs.values())


class CacheProbe:
    """A forward pre-hook that keeps the cache object the model is given.

    The hook removes itself once it has the sample's cache, so a sample's forwards after its
    first pay nothing for it (the profiler's own cost is a product figure); `sample_done` arms
    it again for the next sample.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.cache: Any = None
        self._hook: Any = None
        self._attached = False
        self.seen: dict[str, Any] = {}

    def attach(self) -> None:
        """Watch the model's forward for its cache argument."""
        self._attached = True
        self._arm()

    def _arm(self) -> None:
        if self._hook is not None:
            return

        def hook(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
            self.cache = next((v for v in kwargs.values() if _is_cache(v)), None)
            if self.cache is not None:
                self._disarm()  # torch iterates a copy of its hooks: removing is safe

        self._hook = self.model.register_forward_pre_hook(hook, with_kwargs=True)

    def _disarm(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def detach(self) -> None:
        """Stop watching."""
        self._attached = False
        self._disarm()

    def sample_done(self) -> None:
        """Read the cache a sample used (its final size), forget it, and watch for the next."""
        cache, self.cache = self.cache, None
        if self._attached:
            self._arm()
        if cache is None:
            return
        layers = getattr(cache, "layers", None) or []
        self.seen = {
            "class": type(cache).__name__,
            "layer_classes": sorted({type(x).__name__ for x in layers}),
            "kv_bytes": tensor_bytes(layers) if layers else tensor_bytes(cache),
        }
