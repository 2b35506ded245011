"""The routing knob (issue 17, item 1): fast path, routing cache and learned router on a real
tiny MoE, counted, exact when everything is learned, and undone."""

import json

import pytest
import torch
from typer.testing import CliRunner

from infermeter.errors import UserError
from infermeter.knobs import KNOBS
from infermeter.knobs.evidence import KnobCheckDoc, RoutingSplitDoc
from infermeter.knobs.routing import (
    LayerRouting,
    RoutingShortcuts,
    ShortcutRouting,
    _Entry,
    parse,
    shortcut_config,
)
from infermeter.models import load_model
from tests.helpers import doc_keys

ALL_LEARNED = RoutingShortcuts(
    frequency_threshold=1.0, entropy_threshold=0.0, min_count=10**6, cache_size=0
)


@pytest.fixture(scope="module")
def moe():
    return load_model("tiny-qwen3-moe", device="cpu")


def _ids(lm, rows=2, n=24, seed=0):
    return torch.randint(0, lm.info.vocab, (rows, n), generator=torch.Generator().manual_seed(seed))


def _logits(lm, ids):
    with torch.inference_mode():
        return lm.model(input_ids=ids, use_cache=False).logits


def _count_router_calls(lm):
    calls = []
    cls = type(lm.model.model.layers[0].mlp.gate)
    original = cls.forward

    def counted(self, *a, **k):
        calls.append(1)
        return original(self, *a, **k)

    cls.forward = counted
    return calls, lambda: setattr(cls, "forward", original)


def test_everything_learned_is_exact_and_counts_add_up(moe):
    ids = _ids(moe)
    reference = _logits(moe, ids)
    with ShortcutRouting(moe, ALL_LEARNED) as routing:
        out = _logits(moe, ids)
        split = routing.distribution()
    assert torch.equal(out, reference)
    assert split["tokens"] == {"fast": 0, "cached": 0, "learned": 2 * 24 * 4}  # tokens x layers
    assert not any("forward" in r.__dict__ for r in moe.model.modules())  # undone


def test_a_table_covering_every_token_never_calls_the_learned_router(moe):
    ids = _ids(moe)
    calls, restore = _count_router_calls(moe)  # before wrapping: the wrappers call this one
    try:
        with ShortcutRouting(moe, RoutingShortcuts(cache_size=0)) as routing:
            k = moe.model.model.layers[0].mlp.gate.top_k
            for state in routing.layers:  # every token id of the input gets an entry
                for token in ids.reshape(-1).tolist():
                    state.table[token] = _Entry(torch.arange(k), torch.full((k,), 1.0 / k))
            calls.clear()  # calibration called the routers
            out = _logits(moe, ids)
            split = routing.distribution()
        assert calls == [] and split["learned_router_calls"] == 0
        _logits(moe, ids)
        assert len(calls) == 4  # unwrapped again: each router runs
    finally:
        restore()
    assert split["tokens"]["fast"] == 2 * 24 * 4 and split["tokens"]["learned"] == 0
    assert torch.isfinite(out).all()


def test_the_split_adds_up_with_every_path_taken(moe):
    ids = _ids(moe, rows=1, n=16)
    cfg = RoutingShortcuts(
        frequency_threshold=0.0, entropy_threshold=64.0, min_count=1, cache_size=64, cache_ttl=100
    )
    with ShortcutRouting(moe, cfg) as routing:
        _logits(moe, ids)
        _logits(moe, ids)  # the same tokens again: what the table misses is cached now
        split = routing.distribution()
    tokens = split["tokens"]
    assert sum(tokens.values()) == 2 * 16 * 4
    assert sum(sum(layer.values()) for layer in split["per_layer"]) == 2 * 16 * 4
    assert tokens["fast"] > 0 and tokens["cached"] > 0


def test_cache_evicts_by_size_and_by_age(moe):
    cfg = RoutingShortcuts(cache_size=2, cache_ttl=3)
    routing = ShortcutRouting.__new__(ShortcutRouting)  # no calibration: the cache alone
    routing.cfg, routing.ids, routing.prev = cfg, [10, 11, 12], [-1, 10, 11]
    state = LayerRouting()
    e = torch.tensor([[0, 1], [2, 3], [4, 5]])
    w = torch.ones(3, 2)
    routing._remember(state, [0, 1, 2], e, w)
    assert list(state.cache) == [11, 12]  # size 2: the oldest (10) evicted
    assert routing._cached(state, 1) is not None  # token 11, fresh
    state.calls += 4  # older than the TTL of 3 router calls
    assert routing._cached(state, 2) is None and 12 not in state.cache


def test_knob_parses_checks_applies_and_verifies(moe, tmp_path):
    assert parse(" learned ") == "learned" and shortcut_config("learned") is None
    assert shortcut_config("shortcuts:cache_size=8,entropy_threshold=1.5") == RoutingShortcuts(
        cache_size=8, entropy_threshold=1.5
    )
    f = tmp_path / "var.json"
    f.write_text(json.dumps({"frequency_threshold": 0.5, "cache_key": "token+prev"}))
    assert shortcut_config(str(f)).cache_key == "token+prev"
    for bad, needle in (
        ("fastest", "not a routing value"),
        ("shortcuts:cache_size=-1", "cache_size"),
        ("shortcuts:speed=2", "unknown keys"),
    ):
        with pytest.raises(UserError, match=needle):
            parse(bad)
    knob = KNOBS["routing"]
    with pytest.raises(UserError, match="tiny-llama is dense"):
        knob.check("shortcuts", load_model("tiny-llama", device="cpu"))
    with knob.apply(moe, "shortcuts") as applied:
        evidence = knob.verify(moe, "shortcuts", None, applied)
    assert evidence["routing"] == "shortcuts"
    assert sum(evidence["split"]["percent"].values()) == pytest.approx(100)
    assert 0 <= evidence["top1_agreement"] <= 1 and evidence["kl_nats"] >= 0
    assert not any("forward" in r.__dict__ for r in moe.model.modules())


def test_sweep_over_routing_from_the_cli(tmp_path):
    from infermeter.cli.app import app

    cfg = tmp_path / "var.json"
    cfg.write_text('{"frequency_threshold": 0.5, "entropy_threshold": 2.0, "cache_size": 16}')
    r = CliRunner().invoke(
        app,
        [
            "sweep",
            "--model",
            "tiny-qwen3-moe",
            "--knob",
            f"routing=learned,{cfg}",
            "--samples",
            "1",
            "--new-tokens",
            "4",
            "--prompt-tokens",
            "16",
            "--db",
            str(tmp_path / "r.db"),
        ],
        terminal_width=160,
    )
    assert r.exit_code == 0, r.output
    from infermeter import Store

    store = Store(tmp_path / "r.db")
    runs = [store.get(row["id"]) for row in store.list_runs()]
    assert sorted(run.knobs["routing"] for run in runs) == sorted(["learned", str(cfg)])
    shortcut = next(run for run in runs if run.knobs["routing"] != "learned")
    assert shortcut.checks["routing"]["config"]["cache_size"] == 16  # the evidence is stored
    assert set(shortcut.checks["routing"]["split"]["percent"]) == {"fast", "cached", "learned"}
    during = shortcut.checks["routing"]["during_run"]  # what the run itself routed
    assert set(shortcut.checks["routing"]) <= doc_keys(KnobCheckDoc)
    assert set(shortcut.checks["routing"]["split"]) == doc_keys(RoutingSplitDoc)
    assert set(during) == doc_keys(RoutingSplitDoc)  # the split: the run routed by shortcuts
    assert sum(during["tokens"].values()) > 0 and 0 <= during["cache_utilization"] <= 1


def test_a_table_of_the_routers_own_choices_reproduces_the_model(moe):
    """Each token's entry is what the learned router chose for it (distinct tokens), so the
    fast path must give the learned model's logits: the lookup puts each entry on its row."""
    from infermeter.knobs.routing import _router_outputs

    ids = torch.randperm(moe.info.vocab, generator=torch.Generator().manual_seed(3))[:40]
    ids = ids.reshape(2, 20)
    reference = _logits(moe, ids)
    choices = _router_outputs(moe.model, ids)
    with ShortcutRouting(moe, RoutingShortcuts(cache_size=0)) as routing:
        for state, calls in zip(routing.layers, choices, strict=True):
            experts, weights = calls[0]
            state.table = {
                t: _Entry(experts[i], weights[i]) for i, t in enumerate(ids.reshape(-1).tolist())
            }
        out = _logits(moe, ids)
        assert routing.distribution()["tokens"]["fast"] == 40 * 4
    assert torch.allclose(out, reference, atol=1e-5)
