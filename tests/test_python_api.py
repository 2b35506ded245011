"""docs/python.md's examples, run as they stand: the Python API is a product (issue 36, item 5)."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"


def test_every_public_name_resolves_and_is_listed():
    import infermeter

    for name in infermeter.__all__:
        assert getattr(infermeter, name) is not None, name
    for name in (
        "analyze_run",
        "compare_runs",
        "PerformanceModel",
        "run_load",
        "predict_load",
        "session",
    ):
        assert name in infermeter.__all__ and name in dir(infermeter)


@pytest.mark.slow
def test_the_python_guide_runs_as_written(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/python.md block {i + 1}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "TTFT" in out and "whole request:" in out and "44.0" in out and "1.82" in out
    assert "ms TTFT p50 (predicted)" in out
    assert "configured samples" in out and "RunResult(run_id=" in out and "pct_attainable" in out
    assert "batch  ttft_ms  tpot_ms" in out and "approximate (" in out  # predict's block
    assert (tmp_path / "runs.db").is_file()
