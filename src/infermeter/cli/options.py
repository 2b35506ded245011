"""Options shared by several commands: each defined once, with its help.

`--db` and `--json` mean the same on every command, so they are one object each here (a test
checks no command defines its own). Options that set a `RunConfig` field take their default and
help from the field (`config_option`), so `profile`, `sweep` and the rest cannot drift from the
configuration they build.
"""

from __future__ import annotations

from typing import Any

import typer

from infermeter.run.config import RunConfig
from infermeter.util.settings import default_of, settings_of

DB: Any = typer.Option(
    None,
    "--db",
    help="Database URL or SQLite file (default: INFERMETER_DB, else the user data folder).",
)
JSON_OUT: Any = typer.Option(False, "--json", help="One JSON document on stdout.")
JUNIT: Any = typer.Option(
    None, "--junit", help="Write the gate's checks as a JUnit XML file (any CI reads it)."
)
SUMMARY: Any = typer.Option(
    None,
    "--summary",
    help="Write the gate's verdict and figures as Markdown (also appended to "
    "$GITHUB_STEP_SUMMARY when it is set).",
)

_UNSET = object()


def config_option(name: str, *flags: str, default: Any = _UNSET, note: str = "") -> Any:
    """A typer option for RunConfig field `name`: its spelling, default, help and range.

    Args:
        name: the field.
        flags: the option's spellings ("--model", "-m"); the field's own option by default.
        default: a command's own default (a sweep's None: "as the sweep file or RunConfig").
        note: appended to the field's help, for what this command does with it.
    """
    return spec_option(RunConfig, name, *flags, default=default, note=note)


def spec_option(
    spec: type, name: str, *flags: str, default: Any = _UNSET, note: str = "", hidden: bool = False
) -> Any:
    """A typer option for field `name` of `spec` (made by `util.settings.setting`).

    Its spelling, help and default are the field's unless given: a command's own flags ("--model",
    "-m"; "--selfcheck/--no-selfcheck"), its own default (None: "not given", resolved below the
    CLI) and a `note` appended to the help for what this command does with it. The range, where
    the field has one, ends the help: what `--help` says is what `check_ranges` holds.
    """
    s = settings_of(spec)[name]
    if default is not _UNSET:
        value = default
    else:
        try:
            value = default_of(spec, name)
        except KeyError:  # a required field (a sweep's knobs): the command checks it is given
            value = None
    if isinstance(value, (dict, tuple)) and not value:
        value = None  # a repeatable or JSON option: nothing given
    text = s.help + (f" {note}" if note else "")
    if s.within is not None:
        text += f" (range: {s.within.fix().removeprefix('use ')})"
    return typer.Option(value, *(flags or (s.option,)), help=text, hidden=hidden)
