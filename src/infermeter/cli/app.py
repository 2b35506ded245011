"""The typer application: every `infermeter` command, registered in one place."""

from __future__ import annotations

import sys

import typer

from infermeter.cli.analyze_cmd import analyze_command
from infermeter.cli.bench_cmd import bench_app, spread_list_options
from infermeter.cli.calibrate_cmd import calibrate_command
from infermeter.cli.compare_cmd import compare_command
from infermeter.cli.db_cmd import db_app
from infermeter.cli.energy_cmd import energy_app
from infermeter.cli.experiment_cmd import experiment_command
from infermeter.cli.export_cmd import export_command
from infermeter.cli.fit_cmd import fit_command
from infermeter.cli.history_cmd import history_command
from infermeter.cli.inspect_cmd import inspect_app
from infermeter.cli.knobs_cmd import knobs_command
from infermeter.cli.load_cmd import import_command, load_command, selfcheck_command
from infermeter.cli.load_subcommands import (
    load_capacity_command,
    load_endpoint_command,
    load_predict_command,
    load_run_command,
)
from infermeter.cli.models_cmd import models_command
from infermeter.cli.plot_cmd import plot_command
from infermeter.cli.predict_cmd import predict_command
from infermeter.cli.profile_cmd import profile_command
from infermeter.cli.quiet import quiet_libraries, take_verbose
from infermeter.cli.report_cmd import report_command
from infermeter.cli.runs_cmd import runs_app
from infermeter.cli.serve_cmd import serve_command
from infermeter.cli.sweep_cmd import bare_ray_option, sweep_command, sweeps_app
from infermeter.cli.systems_cmd import systems_analysis_command
from infermeter.cli.usage import OneLineErrors

app = typer.Typer(
    cls=OneLineErrors,
    name="infermeter",
    help="Where the time, memory and energy of transformer inference go.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("profile")(profile_command)
app.command("models")(models_command)
# `load` runs a load with its options; `load selfcheck` measures the client itself
load_app = typer.Typer(invoke_without_command=True, add_completion=False)
load_app.callback()(load_command)
load_app.command("run")(load_run_command)
load_app.command("endpoint")(load_endpoint_command)
load_app.command("capacity")(load_capacity_command)
load_app.command("predict")(load_predict_command)
load_app.command("selfcheck")(selfcheck_command)
load_app.command("import")(import_command)
app.add_typer(load_app, name="load")
app.command("export")(export_command)
app.command("sweep")(sweep_command)
app.command("experiment")(experiment_command)
app.command("plot")(plot_command)
app.command("knobs")(knobs_command)
app.command("calibrate")(calibrate_command)
app.command("analyze")(analyze_command)
app.command("compare")(compare_command)
app.command("history")(history_command)
app.command("systems-analysis")(systems_analysis_command)
app.command("fit")(fit_command)
app.command("predict")(predict_command)
app.command("report")(report_command)
app.command("serve")(serve_command)
app.add_typer(runs_app, name="runs")
app.add_typer(sweeps_app, name="sweeps")
app.add_typer(energy_app, name="energy")
app.add_typer(db_app, name="db")
app.add_typer(inspect_app, name="inspect")
app.add_typer(bench_app, name="bench")


@app.callback()
def _global_options(
    verbose: bool = typer.Option(
        False,
        "--verbose",
        help="Show the libraries' own warnings and logs (hidden by default); "
        "accepted anywhere on the line.",
    ),
) -> None:
    """Where the time, memory and energy of transformer inference go."""


def typer_argv(argv: list[str]) -> tuple[list[str], bool]:
    """`argv` as typer is given it, and whether `--verbose` was there.

    Space-separated lists spread, a bare `--ray` made `--ray local`, `--verbose` taken out.
    Tests that run the CLI in their own process parse through this too.
    """
    argv, verbose = take_verbose(argv)
    return bare_ray_option(spread_list_options(argv)), verbose


def main() -> None:
    """Console-script entry point."""
    sys.argv, verbose = typer_argv(sys.argv)
    quiet_libraries(verbose)
    app()
