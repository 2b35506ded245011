"""Shared options are defined once, and config options follow RunConfig's fields (issue 36, 4)."""

import ast
import inspect
from dataclasses import MISSING, fields
from pathlib import Path

from typer.testing import CliRunner

from infermeter.cli import options
from infermeter.cli.app import app
from infermeter.run.config import RunConfig, field_help

CLI = Path(options.__file__).parent
#: a command's parameter name -> the RunConfig field it sets, where the two differ
RENAMED = {"grid_intensity": "grid_g_per_kwh"}


def _commands(typer_app, prefix=""):
    for info in typer_app.registered_commands:
        name = info.name or info.callback.__name__.removesuffix("_command").replace("_", "-")
        yield f"{prefix}{name}", info.callback
    for group in typer_app.registered_groups:
        yield from _commands(group.typer_instance, f"{prefix}{group.name} ")


def test_every_db_and_json_option_is_the_shared_one():
    seen = 0
    for name, callback in _commands(app):
        params = inspect.signature(callback).parameters
        if "db" in params:
            assert params["db"].default is options.DB, f"{name}: --db defined apart"
            seen += 1
        if "json_out" in params:
            assert params["json_out"].default is options.JSON_OUT, f"{name}: --json defined apart"
    assert seen >= 18  # runs list/show/delete, profile, sweep, load, report, serve, ...


def test_no_command_module_spells_the_shared_flags_itself():
    for path in CLI.glob("*.py"):
        if path.name == "options.py":
            continue
        literals = {
            node.value
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
        assert not literals & {"--db", "--json"}, f"{path.name}: use cli/options.py"


def test_profile_options_take_their_default_and_help_from_the_config_fields():
    from infermeter.cli.profile_cmd import profile_command

    defaults = {f.name: f.default for f in fields(RunConfig) if f.default is not MISSING}
    params = inspect.signature(profile_command).parameters
    checked = []
    for pname, param in params.items():
        fname = RENAMED.get(pname, pname)
        if fname not in defaults or "help" not in {
            k for f in fields(RunConfig) if f.name == fname for k in f.metadata
        }:
            continue
        option = param.default
        assert option.default == defaults[fname], f"--{pname}: default differs from RunConfig"
        assert option.help == field_help(fname), f"--{pname}: help apart from the field"
        checked.append(pname)
    assert len(checked) >= 18, checked
    shown = CliRunner().invoke(app, ["profile", "--help"], env={"COLUMNS": "250"}).output
    assert "Tokens generated per row, exactly." in shown and "--grid-intensity" in shown


def test_no_command_help_carries_notes_meant_for_developers():
    """`predict --help` once printed "Long because typer declares each of the command's options
    as a parameter": a docstring is the command's help, so such notes are comments."""
    import typer

    from infermeter.cli.app import app

    def walk(cmd, path):
        yield path, cmd
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            yield from walk(sub, [*path, name])

    seen = 0
    for path, cmd in walk(typer.main.get_command(app), ["infermeter"]):
        seen += 1
        assert "Long because" not in (cmd.help or ""), " ".join(path)
    assert seen > 20
