"""What every knob is: parse a value, check it against the model, apply it, prove it took effect.

Three scopes, by where a value has to go:
- "config": a field of `RunConfig` (prompt_tokens, new_tokens, batch_size, compile, decoding);
- "load": an argument of `load_model` (dtype): a new value means another loaded model;
- "model": changed on a loaded model and undone afterwards (top_k, active_layers,
  attn_implementation, experts_implementation).
Every knob verifies its effect from measurement (routers' chosen experts, blocks that ran, the
operations that executed, tokens produced), never from the value it was given: a knob whose
check fails raises `KnobNotApplied`, and the sweep records the point as failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, cast

from infermeter.errors import UserError
from infermeter.knobs.evidence import KnobCheckDoc, RoutingObservedDoc
from infermeter.models.loader import LoadedModel

#: Where a knob's value goes (see the module docstring).
Scope = Literal["config", "load", "model"]


class KnobNotApplied(RuntimeError):
    """A knob's verification showed that its value did not take effect."""


@dataclass(frozen=True)
class Knob:
    """One knob: its name, scope and the functions that implement it.

    Attributes:
        name: as typed in `--knob NAME=...`.
        help: one line for `infermeter knobs`.
        scope: "config", "load" or "model" (see the module docstring).
        parse: text -> value (raises UserError with the accepted form).
        check: (value, loaded) -> None; raises UserError when the model cannot take it.
        apply: (loaded, value) -> context manager yielding evidence, for "model" knobs.
        verify: (loaded, value, result, applied) -> evidence dict, where `applied` is what
            `apply` yielded; raises KnobNotApplied.
        field: the RunConfig field ("config") or load_model argument ("load").
        observed: (applied) -> evidence gathered while the run ran (model knobs).
    """

    name: str
    help: str
    scope: Scope
    parse: Callable[[str], Any]
    check: Callable[[Any, LoadedModel], None] | None = None
    apply: (
        Callable[[LoadedModel, Any], contextlib.AbstractContextManager[dict[str, Any]]] | None
    ) = None
    #: (loaded, value, result, applied): `result` is the run (None before it) and `applied`
    #: what `apply` yielded (None after the run); typed loosely because run/ is a higher layer.
    verify: Callable[[LoadedModel, Any, Any, Any], KnobCheckDoc] | None = None
    field: str | None = None
    #: what `apply` yielded -> what the knob saw during the run (e.g. tokens per routing path),
    #: filed with its evidence as `checks[name]["during_run"]`; for "model" knobs only
    observed: Callable[[Any], RoutingObservedDoc] | None = None


@contextlib.contextmanager
def nothing_to_apply() -> Iterator[dict[str, Any]]:
    """For knobs applied through the run's configuration."""
    yield {}


def parse_int(name: str, minimum: int = 1) -> Callable[[str], int]:
    """A parser for whole numbers >= minimum."""

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise UserError(
                f"{name}={text!r} is not a whole number", f"use e.g. {name}=4"
            ) from None
        if value < minimum:
            raise UserError(f"{name}={value} is below {minimum}", f"use {minimum} or more")
        return value

    return parse


def parse_choice(name: str, choices: tuple[str, ...]) -> Callable[[str], str]:
    """A parser for one of a fixed set of words."""

    def parse(text: str) -> str:
        value = str(text).strip()
        if value not in choices:
            raise UserError(
                f"{name}={value!r} is not one of {', '.join(choices)}",
                f"use {name}={choices[0]}",
            )
        return value

    return parse


def parse_bool(name: str) -> Callable[[str], bool]:
    """on/off, true/false, 1/0."""

    def parse(text: str) -> bool:
        value = str(text).strip().lower()
        if value in ("on", "true", "1", "yes"):
            return True
        if value in ("off", "false", "0", "no"):
            return False
        raise UserError(f"{name}={text!r} is not on or off", f"use {name}=on or {name}=off")

    return parse


def verify_samples(attr: str) -> Any:
    """A verifier: every sample had exactly the knob's value of `attr`."""

    def verify(loaded: LoadedModel, value: int, result: Any, applied: Any = None) -> KnobCheckDoc:
        seen = sorted({getattr(s, attr) for s in result.samples})
        if seen != [value]:
            raise KnobNotApplied(f"{attr}={value} but the samples had {seen}")
        # the key is the knob's own name (batch_size, new_tokens, prompt_tokens)
        return cast(KnobCheckDoc, {attr: value, "samples": len(result.samples)})

    return verify


def check_context(field: str) -> Any:
    """A checker: the value fits the model's context window."""

    def check(value: int, loaded: LoadedModel) -> None:
        limit = loaded.info.max_positions
        if limit and value >= limit:
            raise UserError(
                f"{field}={value} does not fit the context of {loaded.info.spec} ({limit})",
                f"use values below {limit}",
            )

    return check
