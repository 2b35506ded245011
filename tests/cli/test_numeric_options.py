"""Every numeric option of every command refuses NaN and infinities with one line.

The cases are generated from the typer app itself, so an option added later is covered without
a line of its own here.
"""

import pytest
import typer
from typer.testing import CliRunner

from infermeter.cli.app import app
from tests.helpers import assert_one_line_error

runner = CliRunner()


def _commands(cmd, path=()):
    if hasattr(cmd, "commands"):  # a group (typer vendors its own click: duck-typed)
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, cmd


def _annotation(param):
    return getattr(param.type_descriptor, "annotation", None)


def _float_options():
    root = typer.main.get_command(app)
    for path, cmd in _commands(root):
        for p in cmd.params:
            if p.param_type_name == "option" and _annotation(p) in (float, float | None):
                args = [
                    "0123abcd" if _annotation(a) is str else "1"
                    for a in cmd.params
                    if a.param_type_name == "argument" and a.required
                ]
                flag = max(p.opts, key=len)
                yield pytest.param(path, flag, args, id=" ".join((*path, flag)))


CASES = list(_float_options())


def test_the_app_has_float_options_to_check():
    assert len(CASES) >= 5  # temperature, top-p, tolerance, max-age-days, power interval, ...


@pytest.mark.parametrize(("path", "flag", "args"), CASES)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_values_are_refused_with_one_line(path, flag, args, value, tmp_path):
    r = runner.invoke(app, [*path, *args, flag, value, "--db", str(tmp_path / "r.db")])
    if "no such option: --db" in r.output:  # a command without a store
        r = runner.invoke(app, [*path, *args, flag, value])
    assert_one_line_error(r, flag, "not a finite number")


@pytest.mark.parametrize("field", ["temperature", "top_p", "power_interval_ms", "grid_g_per_kwh"])
def test_the_python_api_refuses_non_finite_values_too(field):
    from infermeter import RunConfig, UserError

    with pytest.raises(UserError, match="not a finite number"):
        RunConfig(**{field: float("nan")}).validate()


def _int_options():
    root = typer.main.get_command(app)
    for path, cmd in _commands(root):
        names = {o for p in cmd.params for o in p.opts}
        required = [
            "moe-topk" if path == ("experiment",) else "1"
            for a in cmd.params
            if a.param_type_name == "argument" and a.required
        ]
        for p in cmd.params:
            if p.param_type_name == "option" and _annotation(p) in (int, int | None):
                yield pytest.param(
                    path,
                    max(p.opts, key=len),
                    ("--model" in names, "--db" in names, tuple(required)),
                    id=" ".join((*path, p.opts[0])),
                )


INT_CASES = list(_int_options())


def test_the_app_has_int_options_to_check():
    assert len(INT_CASES) >= 15  # samples, warmup, new tokens, seed, port, limit, ...


@pytest.mark.parametrize(("path", "flag", "has"), INT_CASES)
@pytest.mark.parametrize("value", ["-1", "0", "1000000000000000"])
def test_every_int_option_takes_zero_negative_and_huge_values_with_one_line(
    path, flag, has, value, tmp_path
):
    """Refused with one line naming the option, or accepted (then the unknown model, given on
    purpose, is the one-line error): never a traceback, a hang or an allocation of 10^15."""
    has_model, has_db, required = has
    # bench attention has no model to make unknown: the smallest benchmark, should it run
    small = ["--seq-lens", "16", "--kinds", "eager", "--samples", "1"]
    args = [*path, *required, *(small if path == ("bench", "attention") else ()), flag, value]
    if has_db:
        args += ["--db", str(tmp_path / "r.db")]
    if has_model:
        args += ["--model", "no-such-model"]
    r = runner.invoke(app, args)
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    if r.exit_code == 0:
        assert value != "1000000000000000" or flag == "--limit", r.output  # huge: refused
        return
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert r.exit_code == 2 and len(lines) <= 2 and lines[0].startswith("error:"), r.output
    if value == "1000000000000000" and flag != "--limit":
        assert flag in r.output, r.output  # refused for its size, before the model is looked up
