"""Refusals first (issue 59, item 5): what the config or the store can refuse is refused before
a model loads. A new user waited 121 s for a prompt longer than the context, 56 s for a top-k
above the experts and 66 s for a locked database, each after the weights loaded.

Each test makes loading fail: the refusal must come first, and be one line."""

from __future__ import annotations

import sqlite3

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from tests.helpers import assert_one_line_error

runner = CliRunner()


@pytest.fixture
def no_loading(monkeypatch):
    """Loading any model fails the test: the refusal must come before it."""
    import infermeter.run.profiling as profiling
    import infermeter.run.sweep as sweep

    def refuse(*args, **kwargs):
        raise AssertionError("the model loaded before the refusal")

    monkeypatch.setattr(profiling, "_load", refuse)
    monkeypatch.setattr(sweep, "load_model", refuse)


def test_a_prompt_past_the_context_is_refused_from_the_config(no_loading, tmp_path):
    db = str(tmp_path / "r.db")
    # tiny-gpt2's context is its config's n_positions
    from infermeter.models.config_only import config_of

    limit = int(config_of("tiny-gpt2")[0].n_positions)
    r = runner.invoke(
        app,
        ["profile", "-m", "tiny-gpt2", "--prompt-tokens", str(limit), "--new-tokens", "8"]
        + ["--db", db],
    )
    assert_one_line_error(r, f"exceed the context of tiny-gpt2 ({limit} positions)")
    # a sweep: the largest prompt with the largest output is one of its points
    r = runner.invoke(
        app,
        ["sweep", "-m", "tiny-gpt2", "--knob", f"prompt_tokens=8,{limit - 4}"]
        + ["--knob", "new_tokens=2,8", "--db", db],
    )
    assert_one_line_error(r, f"prompt ({limit - 4} tokens) + --new-tokens 8 exceed the context")


def test_a_top_k_above_the_experts_or_on_a_dense_model_is_refused_from_the_config(
    no_loading, tmp_path
):
    db = str(tmp_path / "r.db")
    r = runner.invoke(app, ["sweep", "-m", "tiny-qwen3-moe", "--knob", "top_k=2,99", "--db", db])
    assert_one_line_error(r, "top_k=99 is above the", "experts of tiny-qwen3-moe")
    r = runner.invoke(app, ["sweep", "-m", "tiny-llama", "--knob", "top_k=2", "--db", db])
    assert_one_line_error(r, "top_k applies to mixture-of-experts models; tiny-llama is dense")


def test_a_locked_database_is_refused_before_the_model_loads(no_loading, tmp_path, monkeypatch):
    """Another process holds the write lock: the probe waits the store's busy timeout (here
    1 s), then one line, before any weights load; nothing is written."""
    from infermeter import Store

    db = tmp_path / "r.db"
    Store(db)  # an infermeter database
    monkeypatch.setenv("INFERMETER_DB_TIMEOUT_S", "1")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # a writer in the middle of its transaction
    try:
        r = runner.invoke(app, ["profile", "-m", "tiny-llama", "--db", str(db)])
        assert_one_line_error(r, "is locked by another process")
        r = runner.invoke(
            app, ["sweep", "-m", "tiny-llama", "-k", "new_tokens=2,3", "--db", str(db)]
        )
        assert_one_line_error(r, "is locked by another process")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert Store(db).list_runs() == []
