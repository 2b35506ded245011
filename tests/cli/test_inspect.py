"""`infermeter inspect`: structure, MoE layers, shapes and the top-k check on real tiny models."""

import json

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from tests.helpers import assert_one_line_error

runner = CliRunner()


def _json(*args):
    r = runner.invoke(app, ["inspect", *args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-mixtral", "tiny-llava", "tiny-gpt2"])
def test_structure_adds_up_and_collapses_repeats(name):
    from infermeter import load_model

    doc = _json("structure", "-m", name, "--depth", "6")
    rows = doc["modules"]
    total = load_model(name, device="cpu").info.params
    assert rows[0]["params"] == total
    assert sum(r["params"] for r in rows if r["depth"] == 1) == total  # ties counted once
    blocks = next(
        r
        for r in rows
        if r["repeat"] > 1
        and "DecoderLayer" in r["type"]
        or r["repeat"] > 1
        and r["type"] == "GPT2Block"
    )
    assert blocks["repeat"] == 4 and blocks["name"].endswith(".0-3")
    first = rows[rows.index(blocks) + 1]  # the first member's children follow, marked "each"
    assert first["depth"] == blocks["depth"] + 1 and first["each"]
    if name == "tiny-gpt2":  # tied input and output embeddings
        head = next(r for r in rows if r["name"] == "lm_head")
        assert head["params"] == 0 and head["tied_to"] == ["transformer.wte"]


def test_structure_table_for_people():
    r = runner.invoke(app, ["inspect", "structure", "-m", "tiny-llama"], terminal_width=120)
    assert r.exit_code == 0, r.output
    assert "layers.0-3 x4" in r.output and "LlamaDecoderLayer" in r.output
    assert "3.95 M parameters" in r.output


def test_moe_layers_and_a_dense_model_refused():
    doc = _json("moe", "-m", "tiny-mixtral")
    assert [m["layer"] for m in doc["moe_layers"]] == [0, 1, 2, 3]
    assert {(m["experts"], m["top_k"]) for m in doc["moe_layers"]} == {(8, 2)}
    assert all(m["router"].endswith(".mlp.gate") for m in doc["moe_layers"])
    r = runner.invoke(app, ["inspect", "moe", "-m", "tiny-llama"])
    assert_one_line_error(r, "no mixture-of-experts layer")


def test_shapes_of_a_known_module_are_exact(tmp_path):
    doc = _json("shapes", "-m", "tiny-llama", "--prompt-tokens", "16", "--out", str(tmp_path))
    rows = {(r["name"], r["phase"]): r for r in doc["modules"]}
    emb = rows[("model.embed_tokens", "prefill")]
    assert emb["inputs"] == ["[1, 16] int64"] and emb["outputs"] == ["[1, 16, 256] float32"]
    assert rows[("model.embed_tokens", "decode")]["outputs"] == ["[1, 1, 256] float32"]
    assert rows[("lm_head", "decode")]["outputs"] == ["[1, 1, 2048] float32"]
    assert json.loads((tmp_path / "shapes.json").read_text())["prompt_tokens"] == 16


@pytest.mark.parametrize("k", [1, 3])
def test_verify_topk_measures_exactly_k_experts_per_token(k):
    doc = _json("verify-topk", str(k), "-m", "tiny-mixtral")
    assert doc["verified"] and len(doc["routers"]) == 4
    assert all(v == [k] for v in doc["routers"].values())
    r = runner.invoke(app, ["inspect", "verify-topk", "9", "-m", "tiny-mixtral"])
    assert_one_line_error(r, "top_k=9 is above the 8 experts")


@pytest.mark.smollm2
def test_tokens_counts_words_specials_and_the_chat_template(tmp_path):
    from infermeter import load_model

    text = "The river had been rising for three days."
    doc = _json("tokens", "-m", "smollm2-135m", "-p", text)
    tok = load_model("smollm2-135m", device="cpu").tokenizer
    (row,) = doc["prompts"]
    assert row["tokens"] == len(tok(text, add_special_tokens=False)["input_ids"])
    assert (row["chars"], row["words"]) == (len(text), 8)
    assert doc["chat_template"] and doc["chat_template_tokens"] > 0
    assert doc["tokens_per_word"] == row["tokens"] / 8
    vlm = _json("tokens", "-m", "tiny-llava", "--no-chat")
    assert vlm["image_tokens"]["per_image"] > 0 and not vlm["chat_template"]
    r = runner.invoke(app, ["inspect", "tokens", "-p", "x", "--prompts-file", str(tmp_path)])
    assert_one_line_error(r, "not both")


def test_inspect_documents_render_as_reports(tmp_path):
    for what, args in (
        ("structure", ["-m", "tiny-llama"]),
        ("moe", ["-m", "tiny-mixtral"]),
        ("verify-topk", ["1", "-m", "tiny-mixtral"]),
    ):
        doc = _json(what, *args)
        assert doc["kind"] == f"inspect-{what}"
        path = tmp_path / f"{what}.json"
        path.write_text(json.dumps(doc))
        r = runner.invoke(app, ["report", str(path), "--out", str(tmp_path / what)])
        assert r.exit_code == 0, r.output
        md = (tmp_path / what / "report.md").read_text()
        assert md.startswith(f"# infermeter inspect {what.replace('-', ' ')}")
    assert "| model.layers.0-3 |" in (tmp_path / "structure" / "report.md").read_text()
    assert (tmp_path / "moe" / "moe_layers.csv").read_text().count("\n") == 5  # header + 4
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    r = runner.invoke(app, ["report", str(other), "--out", str(tmp_path / "x")])
    assert_one_line_error(r, "not a document infermeter can report")
    other.write_text("{not json")
    r = runner.invoke(app, ["report", str(other), "--out", str(tmp_path / "x")])
    assert_one_line_error(r, "is not valid JSON")
