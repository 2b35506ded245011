"""int8, int4 and fp8 weights through the dtype knob: what is stored, how, what quality costs."""

import pytest
import torch
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.errors import UserError
from infermeter.knobs import KNOBS
from infermeter.models import load_model
from infermeter.models import quantize as quantize_module
from infermeter.models.quantize import stored_weight_dtypes
from tests.helpers import assert_one_line_error

runner = CliRunner()


def _linear_weights(model):
    return {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}


def test_int8_weights_through_torchao_are_verified_and_costed_in_quality():
    pytest.importorskip("torchao")
    full = load_model("tiny-llama", device="cpu")
    lm = load_model("tiny-llama", device="cpu", dtype="int8")
    q = lm.info.quantization
    assert q["scheme"] == "int8" and q["method"] == "torchao Int8WeightOnlyConfig"
    assert q["converted_linear"] == 4 * 7  # q, k, v, o, gate, up, down per block; not lm_head
    stored = stored_weight_dtypes(lm.model)
    assert stored["int8"] == sum(
        m.weight.numel() for n, m in _linear_weights(full.model).items() if n != "lm_head"
    )
    assert stored == q["stored_weight_dtypes"]
    assert 0.5 <= q["quality"]["top1_agreement"] <= 1 and 0 < q["quality"]["kl_nats"] < 0.01
    evidence = KNOBS["dtype"].verify(lm, "int8", None)
    assert evidence["weight_mib"] < 0.5 * lm.info.params * 4 / 2**20
    assert evidence["top1_agreement"] == q["quality"]["top1_agreement"]
    ids = torch.randint(0, lm.info.vocab, (1, 16))
    with torch.no_grad():  # the quantized model computes nearly what the full one does
        a, b = full.model(ids).logits, lm.model(ids).logits
    assert 0 < (a - b).abs().max() < 0.1 * a.abs().max()


def test_int4_weights_are_packed_per_group_computed_in_bfloat16_and_verified():
    pytest.importorskip("torchao")
    full = load_model("tiny-llama", device="cpu", dtype="bfloat16")
    lm = load_model("tiny-llama", device="cpu", dtype="int4")
    q = lm.info.quantization
    # hidden 256 takes groups of 128; the MLP's down projection (688 wide) takes none of
    # 128, 64 or 32 and stays in bfloat16, counted as unconverted
    assert q["scheme"] == "int4" and q["converted_linear"] == 4 * 6
    assert "HQQ scales; 24 in groups of 128" in q["method"]
    # parameters counted as parameters, not as packed elements (issue 59: 3.95 M read 1.05 M)
    assert lm.info.params == full.info.params
    downs = sum(m.weight.numel() for n, m in _linear_weights(full.model).items() if "down" in n)
    assert q["unconverted_params"] >= downs
    stored = stored_weight_dtypes(lm.model)
    assert stored["int4"] == sum(
        m.weight.numel()
        for n, m in _linear_weights(full.model).items()
        if n != "lm_head" and "down" not in n
    )
    assert {str(p.dtype) for p in lm.model.parameters() if p.is_floating_point()} == {
        "torch.bfloat16"
    }  # int4's kernels take bfloat16 activations: the model computes in bfloat16
    assert q["quality_reference"] == "the same weights unquantized, in bfloat16"
    evidence = KNOBS["dtype"].verify(lm, "int4", None)
    assert evidence["stored_weight_dtypes"] == stored
    assert evidence["weight_mib"] < KNOBS["dtype"].verify(full, "bfloat16", None)["weight_mib"]
    fine = load_model("tiny-llama", device="cpu", dtype="int4-g32")
    assert "24 in groups of 32" in fine.info.quantization["method"]
    ids = torch.randint(0, lm.info.vocab, (1, 16))
    with torch.no_grad():  # 4-bit weights: near, not equal; smaller groups nearer
        a, b, c = (m.model(ids).logits.float() for m in (full, lm, fine))
    err = {"g128": float((a - b).norm() / a.norm()), "g32": float((a - c).norm() / a.norm())}
    assert 0 < err["g32"] < err["g128"] < 0.4, err


def test_int4_groups_follow_each_layers_width():
    pytest.importorskip("torchao")
    from infermeter.models.quantize import int4_groups

    model = torch.nn.Sequential(
        torch.nn.Linear(576, 64), torch.nn.Linear(1536, 64), torch.nn.Linear(688, 64)
    )
    names = ["0", "1", "2"]
    # 576 = 4.5 x 128: groups of 64; 1536: 128; 688 takes none of 128, 64, 32
    assert int4_groups(model, names, "int4") == {"0": 64, "1": 128}
    assert int4_groups(model, names, "int4-g32") == {"0": 32, "1": 32}


def test_int4_is_refused_in_one_line_where_torchao_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(quantize_module, "torchao_quantization", lambda: None)
    with pytest.raises(UserError, match="int4 needs torchao"):
        load_model("tiny-llama", device="cpu", dtype="int4")


def test_int8_without_torchao_uses_pytorch_dynamic_quantization(monkeypatch):
    monkeypatch.setattr(quantize_module, "torchao_quantization", lambda: None)
    lm = load_model("tiny-llama", device="cpu", dtype="int8")
    q = lm.info.quantization
    assert q["method"].startswith("torch.ao quantize_dynamic")
    assert set(q["stored_weight_dtypes"]) == {"float32", "qint8"}
    assert KNOBS["dtype"].verify(lm, "int8", None)["stored_weight_dtypes"]["qint8"] > 0
    # its packed weights are no nn.Parameter: counted before packing, 3.95 M stays 3.95 M
    # (issue 59: the header read 1.05 M)
    assert lm.info.params == 3_950_848
    with torch.no_grad():
        out = lm.model(torch.randint(0, lm.info.vocab, (1, 8))).logits
    assert torch.isfinite(out).all()


def test_fp8_is_refused_off_the_gpu_with_one_line(tmp_path):
    with pytest.raises(UserError, match="fp8 needs an NVIDIA GPU"):
        load_model("tiny-llama", device="cpu", dtype="fp8")
    r = runner.invoke(
        app, ["profile", "-m", "tiny-llama", "--dtype", "fp8", "--db", str(tmp_path / "r.db")]
    )
    assert_one_line_error(r, "fp8 needs an NVIDIA GPU", "use int8")


def test_profile_with_int8_says_so_in_its_header(tmp_path):
    pytest.importorskip("torchao")
    from tests.helpers import cli_here

    # a real process: torchao's import-time warnings would show only on its first import
    r = cli_here(
        "profile",
        "-m",
        "tiny-llama",
        "--dtype",
        "int8",
        "--samples",
        "1",
        "--new-tokens",
        "4",
        "--prompt-tokens",
        "16",
        "--db",
        str(tmp_path / "r.db"),
        env={"COLUMNS": "200"},
    )
    assert r.returncode == 0, r.stderr
    assert "weights: 28 linear layers as int8 (torchao Int8WeightOnlyConfig)" in r.stdout
    # the header's dtype is the weights' real storage, not only the compute dtype (said float32)
    assert "· int8 weights, float32 compute" in r.stdout.splitlines()[0]
    assert "Failed to load" not in r.stderr and "Enum subclass" not in r.stderr, r.stderr


def test_precision_experiment_includes_int8_and_int4_with_memory_and_quality(tmp_path):
    pytest.importorskip("torchao")
    r = runner.invoke(
        app,
        [
            "experiment",
            "precision",
            "--quick",
            "--model",
            "tiny-llama",
            "--out",
            str(tmp_path),
            "--db",
            str(tmp_path / "r.db"),
        ],
    )
    assert r.exit_code == 0, r.output
    import csv

    with open(tmp_path / "precision" / "precision.csv") as f:
        rows = {row["dtype"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"float32", "bfloat16", "int8", "int4"}
    assert float(rows["float32"]["top1_agreement"]) == 1.0
    weights = {k: float(v["weight_mib"]) for k, v in rows.items()}
    assert weights["int4"] < weights["int8"] < weights["bfloat16"] < weights["float32"]
