"""What a `decoding` value asks for: greedy, sampling, or one of three kinds of speculation.

Speculative decoding proposes several tokens cheaply and has the target model verify them in
one forward; with greedy verification it never changes the output. transformers runs all three
kinds through `generate`'s assisted decoding:

- `prompt_lookup:N`: up to N tokens copied from where the last tokens occur earlier in the
  prompt (n-gram lookup; no draft model). Pays on repetitive text (code, summaries, edits).
- `assisted:DRAFT`: a draft model (a preset, a folder or a hub id) proposes them; a draft with
  another tokenizer works through transformers' re-encoding between the two.
- `early_exit:K`: the target's own first K blocks and its LM head propose them
  (self-speculation: `assistant_early_exit`); only models trained for it accept many.

Kept free of torch and low in the layers (beside the prompts): the configuration, the knobs
and the CLI all validate a value before anything loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from infermeter.errors import UserError

PLAIN = ("greedy", "sampling")
SPECULATIVE = ("prompt_lookup", "assisted", "early_exit")
EXAMPLES = "greedy, sampling, prompt_lookup:3, assisted:tiny-llama, early_exit:2"


@dataclass(frozen=True)
class Decoding:
    """A parsed `decoding` value."""

    kind: str
    #: prompt_lookup's N (tokens proposed at most) or early_exit's K (blocks the draft runs)
    tokens: int | None = None
    #: assisted's draft model (preset, folder or hub id)
    draft: str | None = None

    @property
    def speculative(self) -> bool:
        """Whether something proposes tokens that the target verifies."""
        return self.kind in SPECULATIVE


def parse_decoding(value: str) -> Decoding:
    """The decoding `value` names; a UserError naming the fix for anything else."""
    text = str(value).strip()
    if text in PLAIN:
        return Decoding(text)
    kind, sep, arg = text.partition(":")
    if kind not in SPECULATIVE:
        raise UserError(f"unknown decoding {text!r}", f"use one of {EXAMPLES}")
    if kind == "assisted":
        if not arg.strip():
            raise UserError(
                "decoding assisted needs a draft model",
                "name one: assisted:tiny-llama, assisted:./draft-folder or assisted:org/model",
            )
        return Decoding(kind, draft=arg.strip())
    if not sep:
        arg = "3" if kind == "prompt_lookup" else ""
    if not arg.isdigit() or int(arg) < 1:
        what = "tokens to look up" if kind == "prompt_lookup" else "blocks the draft runs"
        raise UserError(
            f"decoding {text!r}: {kind} takes a whole number >= 1 of {what}",
            f"use e.g. {kind}:{3 if kind == 'prompt_lookup' else 2}",
        )
    return Decoding(kind, tokens=int(arg))


#: the KV cache's forms a run can ask for (transformers' cache implementations)
CACHE_FORMS = ("dynamic", "static", "quantized", "offloaded", "sliding_window")
#: what each form's `generate` option is (None: transformers' default dynamic cache, which keeps
#: sliding-window layers to their window by itself)
CACHE_IMPLEMENTATION = {
    "dynamic": None,
    "static": "static",
    "quantized": "quantized",
    "offloaded": "offloaded",
    "sliding_window": None,
}
#: the quantized cache's settings: 4-bit keys and values through optimum-quanto, the backend
#: that runs on a CPU (HQQ's is the other)
QUANTIZED_CACHE_CONFIG = {"backend": "quanto", "nbits": 4}
#: what a form's cache is, as transformers names it: the cache's class, and a word its layers'
#: classes hold (None: any)
EXPECTED_CACHE = {
    "dynamic": (("DynamicCache",), None),
    "static": (("StaticCache",), None),
    "quantized": (("QuantizedCache", "QuantoQuantizedCache"), "Quantized"),
    "offloaded": (("DynamicCache",), None),
    "sliding_window": (("DynamicCache",), "Sliding"),
}
