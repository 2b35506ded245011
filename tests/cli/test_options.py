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
RENAMED = {
    "grid_intensity": "grid_g_per_kwh",
    "attn": "attn_implementation",
    "prompts": "prompts_file",
    "slo": "slos",
}


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
    from infermeter.util.settings import settings_of

    settings = settings_of(RunConfig)
    defaults = {f.name: f.default for f in fields(RunConfig) if f.default is not MISSING}
    params = inspect.signature(profile_command).parameters
    checked = []
    for pname, param in params.items():
        fname = RENAMED.get(pname, pname)
        if fname not in settings:
            continue
        option = param.default
        expected = None if defaults[fname] in ((), None) else defaults[fname]
        assert option.default == expected, f"--{pname}: default differs from RunConfig"
        assert option.help.startswith(field_help(fname)), f"--{pname}: help apart from the field"
        if settings[fname].within is not None:
            assert "(range: " in option.help, f"--{pname}: its range is not in --help"
        checked.append(fname)
    # every RunConfig setting is a profile option (compile and tp are profile's own)
    assert set(checked) == set(settings), set(settings) - set(checked)
    assert len(checked) >= 26, checked
    shown = CliRunner().invoke(app, ["profile", "--help"], env={"COLUMNS": "250"}).output
    assert "Tokens generated per row, exactly." in shown and "--grid-intensity" in shown
    assert "(range: 1..65536)" in shown  # --batch-size


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


# --- load: options from the specs' fields (issue 56, item 5; issue 54, item 2) ---------------

#: `load` options that set no spec field: where results go, which mode, what a prediction is for
LOAD_CLI_ONLY = {
    "--fail-if-slo-missed",
    "--out",
    "--db",
    "--json",
    "--junit",
    "--summary",
    "--endpoint",
    "--reference",
    "--find-max-rate",
    "--predict",
    "--capacity",
    "--hardware",
    "--stack",
}
#: an old spelling kept for one release -> the setting it sets
LOAD_OLD_SPELLINGS = {"--max-requests-per-step": "--most-requests-per-rate"}


def _load_specs():
    from infermeter.serving.capacity import CapacitySpec
    from infermeter.serving.endpoint import Endpoint
    from infermeter.serving.load import LoadSpec

    return (LoadSpec, CapacitySpec, Endpoint)


def test_every_load_option_takes_its_help_and_default_from_a_spec_field():
    import typer.models

    from infermeter.util.settings import default_of, settings_of

    by_option = {
        s.option: (cls, name, s) for cls in _load_specs() for name, s in settings_of(cls).items()
    }
    from infermeter.cli.load_cmd import load_command  # the group's own (old spelling)

    load_commands = [("load", load_command)]
    load_commands += [(n, cb) for n, cb in _commands(app) if n.startswith("load ")]
    assert {n for n, _ in load_commands} >= {
        "load",
        "load run",
        "load endpoint",
        "load capacity",
        "load predict",
    }
    seen = set()
    for cmd, callback in load_commands:
        if cmd in ("load selfcheck", "load import"):
            continue  # their own small option sets, not a load's settings
        for pname, param in inspect.signature(callback).parameters.items():
            option = param.default
            if not isinstance(option, typer.models.OptionInfo):
                continue
            decls = [d for d in option.param_decls if d.startswith("--")]
            long = (decls[0] if decls else "--" + pname.replace("_", "-")).split("/")[0]
            if long in LOAD_CLI_ONLY:
                continue
            key = LOAD_OLD_SPELLINGS.get(long, long)
            assert key in by_option, f"{cmd} {long} ({pname}): no spec field defines it"
            cls, name, s = by_option[key]
            assert option.help.startswith(s.help), f"{cmd} {long}: help apart from {name}"
            if s.within is not None:  # --help says the range check_ranges holds
                assert option.help.endswith(f"(range: {s.within.fix().removeprefix('use ')})")
            if option.default is not None:
                assert option.default == default_of(cls, name), f"{cmd} {long}: default differs"
            seen.add(key)
    unused = set(by_option) - seen
    assert not unused, f"spec settings no load command offers: {unused}"
    assert len(seen) >= 35, sorted(seen)


def test_every_ranged_load_setting_is_refused_in_one_line_naming_its_option():
    """Each range is written once, on the field; just outside it, validate names the option."""
    import math
    from dataclasses import replace

    import pytest

    from infermeter.errors import UserError
    from infermeter.util.settings import settings_of

    ranged = 0
    for cls in _load_specs():
        base = cls("http://127.0.0.1:1") if cls.__name__ == "Endpoint" else cls()
        for name, s in settings_of(cls).items():
            if s.within is None:
                continue
            r = s.within
            outside = [r.low if r.open_low else r.low - 1]
            outside.append(
                r.high if r.open_high else (r.high + 1 if math.isfinite(r.high) else None)
            )
            for value in [v for v in outside if v is not None] + [math.nan]:
                if isinstance(getattr(base, name), int) and not isinstance(value, int):
                    if math.isnan(value):
                        continue
                    value = int(value)
                bad = replace(base, **{name: value})
                with pytest.raises(UserError) as err:
                    bad.validate()
                assert err.value.problem.startswith(f"{s.option} "), err.value.line()
                assert "out of range" in err.value.problem and err.value.fix.startswith("use ")
                ranged += 1
            good = replace(
                base,
                **{
                    name: r.high
                    if not r.open_high and math.isfinite(r.high)
                    else getattr(base, name)
                },
            )
            if name != "warmup_requests":  # also below --requests (a relation, not a range)
                good.validate()
    assert ranged >= 40, ranged


#: `sweep` options that set no spec field: the sweep file, where prompts and results come from
SWEEP_CLI_ONLY = {
    "--config",
    "--db",
    "--out",
    "--json",
    "--workload",
    "--dataset",
    "--dataset-split",
    "--dataset-field",
}


def test_every_sweep_option_takes_its_help_from_a_spec_field():
    import typer.models

    from infermeter.cli.sweep_cmd import sweep_command
    from infermeter.experiments.placement import RayPlacement
    from infermeter.run.sweep_spec import SweepSpec
    from infermeter.util.settings import settings_of

    by_option = {
        s.option: s
        for cls in (RunConfig, SweepSpec, RayPlacement)
        for s in settings_of(cls).values()
    }
    seen = set()
    for pname, param in inspect.signature(sweep_command).parameters.items():
        option = param.default
        if not isinstance(option, typer.models.OptionInfo):
            continue
        decls = [d for d in option.param_decls if d.startswith("--")]
        long = (decls[0] if decls else "--" + pname.replace("_", "-")).split("/")[0]
        if long in SWEEP_CLI_ONLY:
            continue
        assert long in by_option, f"sweep {long} ({pname}): no spec field defines it"
        assert option.help.startswith(by_option[long].help), f"sweep {long}: help apart"
        seen.add(long)
    ours = {s.option for cls in (SweepSpec, RayPlacement) for s in settings_of(cls).values()}
    assert ours <= seen, ours - seen
    assert len(seen) >= 20, sorted(seen)
