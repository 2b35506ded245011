"""tools/lock.py: the recorded versions are what the running environment has, torch left out."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("lock", ROOT / "tools" / "lock.py")
lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lock)


def test_the_bound_is_raised_and_the_lower_bound_and_comment_kept(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text('dependencies = [\n  "torch>=2.4",\n  "transformers>=5.23,<=5.24.0",  # note\n]\n')
    lock.raise_bound(p, "5.25.1")
    assert '"transformers>=5.23,<=5.25.1",  # note' in p.read_text()
    assert '"torch>=2.4"' in p.read_text()


def test_frozen_pins_this_environment_but_torch_and_the_project(tmp_path):
    venv = Path(sys.executable).parents[1]
    pins = lock.frozen(venv)
    names = {p.split("==")[0].lower() for p in pins}
    assert "transformers" in names and "sqlalchemy" in names
    assert "torch" not in names and "infermeter" not in names
    assert all("+" not in p for p in pins)  # local labels (+cpu) would pin one build
    import transformers

    assert f"transformers=={transformers.__version__}" in pins


def test_the_recorded_constraints_match_this_checkout():
    """constraints.txt pins the transformers release the package's upper bound names."""
    text = (ROOT / "constraints.txt").read_text()
    pinned = next(x for x in text.splitlines() if x.startswith("transformers=="))
    assert f"<={pinned.split('==')[1]}" in (ROOT / "pyproject.toml").read_text()
