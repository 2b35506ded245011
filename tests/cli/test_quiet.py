"""No library warning reaches the terminal unless --verbose; typos answered before torch loads."""

import os
import re
import subprocess
import sys

import pytest

from infermeter.cli.quiet import take_verbose
from infermeter.errors import UserError
from infermeter.models.spec import check_model_spec, closest_names

#: what the libraries print when nothing stops them (transformers, torchao, torch, tqdm)
NOISE = re.compile(r"Warning|warn|deprecat|Failed to load|_pytree|it/s\]", re.I)


def test_verbose_is_taken_from_anywhere_before_the_double_dash():
    assert take_verbose(["im", "profile", "--verbose", "-m", "x"]) == (
        ["im", "profile", "-m", "x"],
        True,
    )
    assert take_verbose(["im", "profile"]) == (["im", "profile"], False)
    assert take_verbose(["im", "x", "--", "--verbose"]) == (["im", "x", "--", "--verbose"], False)


@pytest.mark.parametrize("verbose", [False, True])
def test_library_warnings_and_logs_are_hidden_unless_verbose(verbose):
    code = (
        "import logging, warnings\n"
        "from infermeter.cli.quiet import quiet_libraries\n"
        f"quiet_libraries({verbose})\n"
        "warnings.warn('old argument name', FutureWarning)\n"
        "lg = logging.getLogger('torchao'); lg.addHandler(logging.StreamHandler())\n"
        "lg.warning('Failed to load kernels')\n"
        "logging.getLogger('x').error('a real error')\n"
        "import subprocess, sys\n"  # a child process (a torchrun rank) inherits the setting
        "subprocess.run([sys.executable, '-c', 'import warnings; warnings.warn(\"child\")'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "a real error" in r.stderr  # errors always reach the user
    shown = [m in r.stderr for m in ("old argument name", "Failed to load", "child")]
    assert shown == [verbose] * 3, r.stderr


#: runs CLI commands one after another in one interpreter, as the console script runs one;
#: prints each command's exit status on a line of its own to stdout
_COMMANDS = """
import json, sys
from infermeter.cli.app import main
for argv in json.loads(sys.argv[1]):
    sys.argv = ["infermeter", *argv]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    print(f"exit {code}", flush=True)
"""


@pytest.mark.slow
def test_profile_and_predict_print_no_library_warning(tmp_path):
    """int8 imports torchao (kernel-library and _pytree notices on a CPU machine); predict
    then imports what it needs beyond the profile's. One interpreter runs both, as the console
    script would each: a new one for predict (10 s of imports here) would show nothing more,
    since every library it loads first is imported, and quieted, the same way."""
    import json

    profile = ["profile", "-m", "tiny-llama", "--dtype", "int8", "--prompt-tokens", "8"]
    profile += ["--new-tokens", "3", "--samples", "1", "--mode", "standard"]
    predict = ["predict", "-m", "tiny-llama", "--hardware", "h100-sxm"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    r = subprocess.run(
        [sys.executable, "-c", _COMMANDS, json.dumps([profile, predict])],
        capture_output=True,
        text=True,
        env={**env, "INFERMETER_HOME": str(tmp_path)},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    exits = [x for x in r.stdout.splitlines() if x.startswith("exit ")]
    assert exits == ["exit 0", "exit 0"], r.stdout[-2000:] + r.stderr[-2000:]
    assert "decode" in r.stdout and "h100" in r.stdout.lower()
    assert not NOISE.search(r.stderr), r.stderr[-2000:]


def test_a_typo_is_answered_with_the_closest_names_before_torch_loads(tmp_path):
    env = {"HF_HUB_OFFLINE": "0"}  # as on a user's machine: only the typo check keeps it fast
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "infermeter", "profile", "-m", "tiny-lama"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "INFERMETER_HOME": str(tmp_path), **env},
    )
    assert r.returncode == 2
    lines = [x for x in r.stderr.splitlines() if not x.startswith("import time:")]
    assert len(lines) == 1 and "did you mean tiny-llama" in lines[0], lines
    imported = set(re.findall(r"^import time:.*\|\s+(\S+)$", r.stderr, re.M))
    assert "torch" not in imported and "transformers" not in imported


def test_which_names_are_refused_at_once(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    for ok in ("tiny-llama", "TINY-LLAMA", "smollm2-135m", str(tmp_path), "gpt2", "org/name"):
        check_model_spec(ok)  # presets, folders, and hub ids that are no typo of ours
    with pytest.raises(UserError, match="did you mean tiny-qwen3-moe"):
        check_model_spec("tiny-qwen3-mo")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="HF_HUB_OFFLINE"):
        check_model_spec("org/name")  # offline and not cached: nothing could find it
    # in the local cache: accepted offline
    snap = tmp_path / "hub" / "models--org--name" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (tmp_path / "hub" / "models--org--name" / "refs").mkdir()
    (tmp_path / "hub" / "models--org--name" / "refs" / "main").write_text("abc")
    check_model_spec("org/name")
    assert closest_names("tiny-lama") == ["tiny-llama", "tiny-llava"]
