"""`serving/plan.py`: a load command's arguments checked whole into a plan, below the CLI."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from infermeter.errors import UserError
from infermeter.serving.plan import LoadAsk, plan_load

CLI = Path(__file__).resolve().parents[2] / "src" / "infermeter" / "cli"


@pytest.mark.parametrize(
    ("ask", "mode", "rates"),
    [
        (LoadAsk(), "once", [4.0]),
        (LoadAsk(rate="1,2,inf"), "sweep", [1.0, 2.0, math.inf]),
        (LoadAsk(find_max_rate=True, rate="2", slo=("e2e_ms=900",)), "capacity", [2.0]),
        (LoadAsk(predict=True, rate="1,3"), "predict", [1.0, 3.0]),
    ],
)
def test_each_mode_is_planned_from_what_was_asked(ask, mode, rates):
    plan = plan_load(ask)
    assert plan.mode == mode
    assert plan.rates == rates
    assert plan.spec.rate == rates[0]
    assert (plan.capacity is not None) == (mode == "capacity")
    if plan.capacity is not None:
        assert plan.capacity.start_rate == 2.0
        assert dict(plan.spec.slos) == {"e2e_ms": 900.0}


def test_an_endpoint_plan_carries_its_body_and_headers():
    plan = plan_load(
        LoadAsk(
            endpoint="http://127.0.0.1:9/v1",
            extra_body='{"min_tokens": 8}',
            header=("X-Tenant: a",),
            more_endpoints=("http://127.0.0.1:10",),
        )
    )
    assert plan.endpoint is not None
    assert plan.endpoint.extra_body == {"min_tokens": 8}
    assert plan.endpoint.headers == {"X-Tenant": "a"}
    assert plan.endpoint.more_urls == ("http://127.0.0.1:10",)


@pytest.mark.parametrize(
    ("ask", "needle"),
    [
        (LoadAsk(find_max_rate=True), "searches under SLOs"),
        (LoadAsk(find_max_rate=True, slo=("e2e_ms=1",), concurrency=2), "closed loop"),
        (LoadAsk(predict=True, server="static"), "continuous batching only"),
        (LoadAsk(predict=True, metrics_url="http://127.0.0.1:9/metrics"), "no server to scrape"),
        (LoadAsk(endpoint="http://127.0.0.1:9", extra_body="[1]"), "must be a JSON object"),
        (LoadAsk(endpoint="http://127.0.0.1:9", header=("no colon",)), "is not 'Name: value'"),
        (LoadAsk(header=("X: y",)), "sent to an endpoint"),
        (LoadAsk(rate="fast"), "is not a rate"),
    ],
)
def test_a_plan_that_cannot_run_is_refused_in_one_line(ask, needle):
    with pytest.raises(UserError, match=needle):
        plan_load(ask)


def test_the_load_commands_only_parse_and_render():
    """The CLI's load modules call no runner: measuring, searching and storing live below."""
    runners = {
        "run_load",
        "run_rate_sweep",
        "find_capacity",
        "load_model",
        "store_load",
        "predict_load",
        "as_run",
        "read_peer_file",
    }
    called = {}
    for name in ("load_cmd.py", "load_subcommands.py", "capacity_view.py", "load_predict_view.py"):
        tree = ast.parse((CLI / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name in runners:
                        called.setdefault(name, []).append(alias.name)
    assert called == {}


def test_a_load_run_reports_each_request_served(tiny_llama):
    """Issue 59, item 7: `load run` showed nothing until it ended; its bar hears each request."""
    from infermeter.serving.load import run_load

    heard: list[tuple[str, int, int]] = []
    plan = plan_load(LoadAsk(rate="inf", requests=5, prompt_tokens="8", new_tokens="2"))
    run_load(plan.spec, loaded=tiny_llama, on_progress=lambda *a: heard.append(a))
    served = [done for stage, done, total in heard if stage == "requests" and total == 5]
    assert served[0] == 0 and served[-1] == 5 and served == sorted(served)
    assert len(set(served)) == 6  # every request, from 0 to 5


def test_the_live_line_never_shows_more_in_the_batch_than_in_flight():
    """Issue 59: the load card read "0 in flight · batch: 1 running" (two instants)."""
    from types import SimpleNamespace

    from infermeter.serving.batch_state import one_instant
    from infermeter.serving.load import _Arrivals

    heard = []

    class Live:  # the live feed's row, as the scheduler's last step left it
        state = {"steps": {"running": 1, "waiting": 0}, "tokens": 0}

        def __call__(self, *progress):
            heard.append(progress)

    request = SimpleNamespace(index=0, token_s=[0.1], end_s=1.0, follows=None)
    arrivals = _Arrivals([request], [0.0], None, Live(), None)
    arrivals.in_flight = 1
    arrivals.finished(request)  # the last request ends after the scheduler's last step
    assert Live.state["steps"] == {"running": 0, "waiting": 0, "in_flight": 0}
    assert heard[-1] == ("requests", 1, 1)
    # and a step that lands after a request ended is cut to the requests in flight
    assert one_instant({"in_flight": 2, "running": 3, "waiting": 1}) == {
        "in_flight": 2, "running": 2, "waiting": 0}  # fmt: skip
    assert one_instant({"running": 3}) == {"running": 3}  # no client count: left as it is


def test_the_prompt_token_line_names_the_extreme_on_the_medians_side():
    """A server that counts fewer prompt tokens than meant: "median -19.5; most -13" read as
    if -13 were the largest gap; the line names the furthest, -26."""
    from infermeter.cli.load_cmd import endpoint_lines

    fewer = {"tokens": {"prompt_extra_median": -19.5, "prompt_extra_max": -13,
                        "prompt_extra_min": -26}}  # fmt: skip
    (line, style), *_ = endpoint_lines(fewer)
    assert "-19.5 prompt tokens" in line and "furthest -26" in line and style == "yellow"
    more = {"tokens": {"prompt_extra_median": 13, "prompt_extra_max": 14, "prompt_extra_min": 12}}
    (line, _), *_ = endpoint_lines(more)
    assert "furthest +14" in line and "chat template" in line


def test_selfcheck_options_come_from_its_spec_and_are_checked_once():
    """`load selfcheck` checked its ranges by hand in the CLI; they are a spec's fields now,
    whose help states the range and whose check is the one every other load option uses."""
    from typer.testing import CliRunner

    from infermeter.cli.app import app
    from infermeter.serving.selfcheck import SelfCheckSpec
    from tests.helpers import assert_one_line_error

    runner = CliRunner()
    help_text = runner.invoke(app, ["load", "selfcheck", "--help"]).output
    assert "(range: 1..256)" in help_text and "(range: 16..2000)" in help_text
    r = runner.invoke(app, ["load", "selfcheck", "--requests", "5"])
    assert_one_line_error(r, "--requests 5 is out of range; use 16..2000")
    with pytest.raises(UserError, match="--tokens 300 is out of range"):
        SelfCheckSpec(tokens=300).validate()
