"""An offline tokenizer for presets: byte-level BPE trained on the built-in prompts.

Presets have random weights, so any tokenizer "fits" them; what matters is that prompts are real
text cut into a realistic number of tokens, and that nothing is downloaded. Training on the ~100
built-in prompts takes well under a second; the result is cached in the user cache folder, keyed
by a hash of the corpus and the settings, so every process gets the same ids.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from infermeter.paths import cache_dir
from infermeter.util.atomic import atomic_path
from infermeter.workloads.corpus import builtin_texts

BOS, EOS, PAD, IMAGE = "<|bos|>", "<|eos|>", "<|pad|>", "<image>"
SPECIAL_TOKENS = (BOS, EOS, PAD, IMAGE)
VOCAB_SIZE = 2048


def _key(texts: list[str], vocab_size: int) -> str:
    import tokenizers

    h = hashlib.sha256()
    h.update(json.dumps([texts, vocab_size, SPECIAL_TOKENS, tokenizers.__version__]).encode())
    return h.hexdigest()[:16]


def _train(texts: list[str], vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, tok.token_to_id(BOS))]
    )
    return tok


def builtin_tokenizer(vocab_size: int = VOCAB_SIZE) -> Any:
    """The project's offline tokenizer as a transformers `PreTrainedTokenizerFast`."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    texts = builtin_texts()
    path: Path = cache_dir() / "tokenizers" / f"bpe-{_key(texts, vocab_size)}.json"
    if path.exists():
        tok = Tokenizer.from_file(str(path))
    else:
        tok = _train(texts, vocab_size)
        path.parent.mkdir(parents=True, exist_ok=True)
        # a temporary name of its own: two processes training at once (pytest's two workers on a
        # machine with no cache yet) shared one ".tmp" and the second rename found it gone
        with atomic_path(path) as tmp:
            tok.save(str(tmp))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=[IMAGE],
    )
    fast.padding_side = "left"  # decoder-only generation pads on the left
    return fast


def tokenizer_of(spec: str) -> Any:
    """The tokenizer of a model spec without loading its weights (a preset: the built-in one).

    What `load --endpoint` builds its prompts and counts streamed tokens with.
    """
    from pathlib import Path

    from infermeter.errors import UserError
    from infermeter.models.presets import get_preset
    from infermeter.models.trained import ensure_converted, trained_model

    name = spec.strip()
    if get_preset(name) is not None:
        return builtin_tokenizer()
    trained = trained_model(name)
    where = str(ensure_converted(trained)[0]) if trained is not None else name
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(where)
    except (OSError, ValueError) as exc:
        kind = "folder" if Path(where).expanduser().is_dir() else "model"
        raise UserError(
            f"no tokenizer for {kind} {spec!r} ({str(exc).splitlines()[0][:120]})",
            "give --model a preset, a folder with a tokenizer, or a hub id in the local cache",
        ) from None
