"""Turn text into the exact tensors a run feeds `generate`, one batch per sample.

Two ways to make prompts:
- natural: whole prompts (built-in or from a file), cycled over samples and batch rows, padded on
  the left to the longest row;
- exact length: `prompt_tokens` tokens of real text per row, cut from the corpus at a different
  offset for every row, so no two rows (or samples) repeat and no padding is needed.

When the tokenizer has a chat template and `chat` is on, prompts are wrapped in it; exact-length
prompts then count the template's tokens too, so the model sees exactly `prompt_tokens` tokens.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from infermeter.errors import UserError
from infermeter.workloads.corpus import builtin_texts

_PLACEHOLDER = "\x00CONTENT\x00"


@dataclass(frozen=True)
class VisionInput:
    """How a vision-language model takes an image: size, token id and tokens per image."""

    image_size: int
    image_token_id: int
    tokens_per_image: int
    channels: int = 3
    #: 4: pixel_values [rows, channels, H, W] (LLaVA, Gemma 3); 5: [rows, images, channels, H, W]
    #: (Idefics3 / SmolVLM, which take several images per row)
    pixel_dims: int = 4


@dataclass(frozen=True)
class WorkloadSpec:
    """What to feed the model.

    Attributes:
        batch_size: rows per generate call.
        prompt_tokens: exact text tokens per row (template included); None for natural prompts.
        prompts: user prompts; None means the built-in corpus.
        chat: wrap prompts in the tokenizer's chat template when it has one.
        seed: picks where in the corpus each sample's text starts.
    """

    batch_size: int = 1
    prompt_tokens: int | None = None
    prompts: tuple[str, ...] | None = None
    chat: bool = True
    seed: int = 0


@dataclass
class PromptBatch:
    """Tensors for one generate call, plus what a report needs to describe them."""

    input_ids: Any
    attention_mask: Any
    prompt_tokens: list[int]
    texts: list[str]
    pixel_values: Any = None
    vision_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def generate_kwargs(self, device: Any, dtype: Any) -> dict[str, Any]:
        """Keyword arguments for `model.generate`, moved to the device."""
        kw = {
            "input_ids": self.input_ids.to(device),
            "attention_mask": self.attention_mask.to(device),
        }
        if self.pixel_values is not None:
            kw["pixel_values"] = self.pixel_values.to(device=device, dtype=dtype)
        return kw


def _template_parts(tokenizer: Any) -> tuple[str, str] | None:
    """Text before and after the user's content in the chat template, or None without one."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": _PLACEHOLDER}], tokenize=False, add_generation_prompt=True
    )
    if _PLACEHOLDER not in rendered:
        return None
    before, after = rendered.split(_PLACEHOLDER, 1)
    return before, after


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


_CORPUS_CACHE: weakref.WeakKeyDictionary[Any, dict[int, list[int]]] = weakref.WeakKeyDictionary()


def _encoded_corpus(tokenizer: Any, text: str) -> list[int]:
    """The corpus' token ids, encoded once per tokenizer (a sweep builds batches per point)."""
    try:
        per_tok = _CORPUS_CACHE.setdefault(tokenizer, {})
    except TypeError:  # not weak-referenceable: no cache
        return _encode(tokenizer, text)
    key = hash(text)
    if key not in per_tok:
        if len(per_tok) > 8:
            per_tok.clear()
        per_tok[key] = _encode(tokenizer, text)
    return list(per_tok[key])


def _special_prefix(tokenizer: Any) -> list[int]:
    """Ids the tokenizer adds in front of plain text (e.g. BOS); empty for GPT-2 style."""
    with_special = list(tokenizer("a")["input_ids"])
    plain = _encode(tokenizer, "a")
    if with_special[-len(plain) :] == plain:
        return with_special[: len(with_special) - len(plain)]
    return []


def build_batches(
    tokenizer: Any, spec: WorkloadSpec, count: int, vision: VisionInput | None = None
) -> list[PromptBatch]:
    """Make `count` batches (one per sample, warm-up included) as the spec says."""
    import torch

    if spec.batch_size < 1:
        raise UserError(f"batch size {spec.batch_size} is below 1", "use --batch-size 1 or more")
    parts = _template_parts(tokenizer) if spec.chat else None
    if parts:
        prefix = _encode(tokenizer, parts[0])
        suffix = _encode(tokenizer, parts[1])
    else:
        prefix, suffix = _special_prefix(tokenizer), []
    image_ids: list[int] = []
    if vision is not None:
        image_ids = [vision.image_token_id] * vision.tokens_per_image

    rows_needed = count * spec.batch_size
    if spec.prompt_tokens is not None:
        rows = _exact_rows(tokenizer, spec, rows_needed, prefix, suffix)
    else:
        rows = _natural_rows(tokenizer, spec, rows_needed, prefix, suffix)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    gen = torch.Generator().manual_seed(spec.seed)
    batches = []
    for s in range(count):
        chunk = rows[s * spec.batch_size : (s + 1) * spec.batch_size]
        # Image tokens go right after the template's prefix, before the text (LLaVA's layout).
        full = [r[: r.index(-1)] + image_ids + r[r.index(-1) + 1 :] for r in chunk]
        width = max(len(r) for r in full)
        ids = torch.full((len(full), width), pad, dtype=torch.long)
        mask = torch.zeros((len(full), width), dtype=torch.long)
        for i, r in enumerate(full):
            ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r) :] = 1
        pixel_values = None
        if vision is not None:
            size = (len(full), vision.channels, vision.image_size, vision.image_size)
            pixel_values = torch.randn(size, generator=gen)
            if vision.pixel_dims == 5:
                pixel_values = pixel_values.unsqueeze(1)  # one image per row
        batches.append(
            PromptBatch(
                input_ids=ids,
                attention_mask=mask,
                prompt_tokens=[len(r) - 1 for r in chunk],
                texts=[tokenizer.decode([t for t in r if t != -1]) for r in chunk],
                pixel_values=pixel_values,
                vision_tokens=len(image_ids),
            )
        )
    return batches


def _natural_rows(
    tokenizer: Any, spec: WorkloadSpec, n: int, prefix: list[int], suffix: list[int]
) -> list[list[int]]:
    texts = list(spec.prompts) if spec.prompts else builtin_texts()
    start = spec.seed % len(texts)
    # -1 marks where image tokens (if any) are spliced in; it never reaches the model.
    return [
        prefix + [-1] + _encode(tokenizer, texts[(start + i) % len(texts)]) + suffix
        for i in range(n)
    ]


def _exact_rows(
    tokenizer: Any, spec: WorkloadSpec, n: int, prefix: list[int], suffix: list[int]
) -> list[list[int]]:
    target = spec.prompt_tokens or 0
    content_len = target - len(prefix) - len(suffix)
    if content_len < 1:
        what = "the chat template and special tokens" if suffix else "special tokens (BOS)"
        raise UserError(
            f"--prompt-tokens {target} leaves no room for text "
            f"({what} take {len(prefix) + len(suffix)})",
            f"use --prompt-tokens {len(prefix) + len(suffix) + 1} or more"
            + (", or --no-chat" if suffix else ""),
        )
    texts = list(spec.prompts) if spec.prompts else builtin_texts()
    stream = _encoded_corpus(tokenizer, "\n\n".join(texts))
    if not stream:
        raise UserError("the prompts produce no tokens", "give prompts with some text")
    # Repeat the text until every row can start at its own offset and still be full length.
    stride = max(1, len(stream) // max(n, 1))
    while len(stream) < content_len + stride * n:
        stream = stream + stream
    offset0 = (spec.seed * 7919) % max(1, len(stream) - content_len - stride * (n - 1))
    return [
        prefix + [-1] + stream[offset0 + i * stride : offset0 + i * stride + content_len] + suffix
        for i in range(n)
    ]


def token_report(tokenizer: Any, texts: list[str], chat: bool = True) -> dict[str, Any]:
    """How a tokenizer cuts these prompts: `infermeter inspect tokens`.

    Per prompt: characters, words (whitespace-separated), tokens of the text alone, what the
    tokenizer adds around plain text (BOS and the like), and the chat template's overhead
    when it has one; and for all: tokens per word and characters per token.
    """
    special = _special_prefix(tokenizer)
    parts = _template_parts(tokenizer) if chat else None
    template = (_encode(tokenizer, parts[0]), _encode(tokenizer, parts[1])) if parts else None
    rows: list[dict[str, Any]] = []
    for text in texts:
        ids = _encode(tokenizer, text)
        rows.append(
            {
                "chars": len(text),
                "words": len(text.split()),
                "tokens": len(ids),
                "special_tokens": len(special),
                "chat_template_tokens": len(template[0]) + len(template[1]) if template else None,
                "first_tokens": [tokenizer.decode([t]) for t in ids[:12]],
            }
        )
    tokens = sum(int(r["tokens"]) for r in rows)
    words = sum(int(r["words"]) for r in rows)
    chars = sum(int(r["chars"]) for r in rows)
    return {
        "prompts": rows,
        "tokens": tokens,
        "tokens_per_word": tokens / words if words else None,
        "chars_per_token": chars / tokens if tokens else None,
        "special_prefix": [tokenizer.decode([t]) for t in special],
        "chat_template": bool(template),
        "chat_template_tokens": len(template[0]) + len(template[1]) if template else 0,
    }
