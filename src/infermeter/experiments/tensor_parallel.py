"""`infermeter profile --tp N`: one run sharded over N processes that `torchrun` starts.

The model is split by transformers' tensor-parallel plan, and every collective is counted,
sized and timed. The launcher checks that the model has a plan (`base_model_tp_plan` in its
config) and that its heads split evenly, saves a preset's seeded weights as a checkpoint (each
rank loads its shard from the same files), and runs `python -m torch.distributed.run
--standalone` with this module as the program: gloo on CPU, NCCL on GPU (transformers picks the
backend). Every rank runs the same profile in lockstep (the collectives need all of them); rank
0 stores the run with two layer tables: `collectives` (per phase, block and operation) and
`communication` (per phase: forwards, collectives, bytes, time communicating, time computing
and the share).

Every process ends with its parent (`profile --tp 2` orphaned its launcher and ranks, which kept
writing, on Ctrl-C or SIGKILL of the parent: issue 35). torchrun is started through a trampoline
that asks Linux for SIGTERM when its parent dies (`PR_SET_PDEATHSIG`) and then execs it, in its
own process group; each rank asks the same of torchrun. Ctrl-C or SIGTERM of `profile` sends
SIGTERM to the group (rank 0 stores what was measured as `terminated`), then SIGKILL after a
grace period. The job's temporary folder names its owner: one left by a killed owner is removed
by the next `--tp` run.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from infermeter.errors import UserError
from infermeter.run.config import RunConfig
from infermeter.run.signals import stop_on_signals


def check_plan(model: str, tp: int) -> Any:
    """The model's config, once it is known to shard over `tp` processes."""
    from infermeter.models.config_only import config_of

    if tp < 2:
        raise UserError(f"--tp {tp}: tensor parallelism needs 2 or more processes", "e.g. --tp 2")
    config, shown = config_of(model)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    plan = getattr(text, "base_model_tp_plan", None)
    if not plan:
        raise UserError(
            f"{shown} ({type(config).__name__}) has no tensor-parallel plan in transformers",
            "profile it without --tp",
        )
    for field in ("num_attention_heads", "num_key_value_heads"):
        heads = getattr(text, field, None)
        if heads and heads % tp:
            raise UserError(
                f"--tp {tp} does not divide {shown}'s {heads} "
                f"{field.removeprefix('num_').replace('_', ' ')}",
                f"use a --tp that divides {heads}",
            )
    return config


def _checkpoint(config: RunConfig, folder: Path) -> str:
    """The folder every rank loads: a preset saved with its seeded weights, else the model's."""
    from infermeter.models.loader import load_model
    from infermeter.models.presets import get_preset
    from infermeter.models.trained import ensure_converted, trained_model

    if get_preset(config.model) is not None:
        lm = load_model(config.model, dtype="float32", device="cpu", seed=config.seed)
        lm.model.save_pretrained(folder)
        lm.tokenizer.save_pretrained(folder)
        return str(folder)
    trained = trained_model(config.model)
    if trained is not None:
        return str(ensure_converted(trained)[0])
    return config.model


#: the temporary folders of `--tp` jobs, each with the file naming its owner
TMP_PREFIX = "infermeter-tp-"
OWNER_FILE = "owner"
#: seconds the processes get to store what they measured after SIGTERM, before SIGKILL
STOP_GRACE_S = 20.0


def die_with_parent(parent: int | None = None) -> None:
    """Ask Linux for SIGTERM when this process's parent dies; exit if it already has.

    A no-op elsewhere (no `prctl`): there, a killed parent still leaves its children.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    if parent is not None and os.getppid() != parent:  # it died before we asked
        os._exit(128 + int(signal.SIGTERM))


def remove_orphaned_folders(root: str | None = None) -> list[str]:
    """Remove the job folders whose owner process is gone (killed before it cleaned up)."""
    import psutil

    gone = []
    for folder in Path(root or tempfile.gettempdir()).glob(f"{TMP_PREFIX}*"):
        try:
            pid, started = (folder / OWNER_FILE).read_text().split()
            proc = psutil.Process(int(pid))
            alive = abs(proc.create_time() - float(started)) < 1.0
        except (OSError, ValueError, psutil.Error):
            alive = False
        if not alive:
            shutil.rmtree(folder, ignore_errors=True)
            gone.append(str(folder))
    return gone


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the launcher's process group (it and its ranks), SIGKILL after the grace."""
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def profile_tp(config: RunConfig, tp: int, db_url: str) -> str:
    """Run `config` over `tp` processes; the stored run's id."""
    import psutil

    check_plan(config.model, tp)
    remove_orphaned_folders()
    with tempfile.TemporaryDirectory(prefix=TMP_PREFIX) as tmp:
        me = psutil.Process()
        (Path(tmp) / OWNER_FILE).write_text(f"{me.pid} {me.create_time()}")
        # the configuration as it is (its prompts included), for our own processes only
        (Path(tmp) / "config.pickle").write_bytes(pickle.dumps(config))
        job = {
            "folder": _checkpoint(config, Path(tmp) / "checkpoint"),
            "config": str(Path(tmp) / "config.pickle"),
            "db": db_url,
            "result": str(Path(tmp) / "result.json"),
        }
        job_file = Path(tmp) / "job.json"
        job_file.write_text(json.dumps(job))
        cmd = [
            sys.executable,
            "-m",
            "infermeter.experiments.tensor_parallel",
            "--launch",
            str(os.getpid()),
            "--standalone",
            f"--nproc-per-node={tp}",
            "-m",
            "infermeter.experiments.tensor_parallel",
            str(job_file),
        ]
        threads = max(1, (os.cpu_count() or 1) // tp)
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            with stop_on_signals():
                _, stderr = proc.communicate()
        except BaseException:  # Ctrl-C, SIGTERM (Terminated): the group stops with us
            _stop_group(proc)
            raise
        result = Path(job["result"])
        if proc.returncode != 0 or not result.exists():
            lines = [ln for ln in stderr.splitlines() if "Error" in ln or "error:" in ln]
            raise UserError(
                f"the {tp} tensor-parallel processes failed: "
                f"{(lines or stderr.splitlines() or ['no output'])[-1].strip()}",
                "run it again with INFERMETER_DEBUG=1 to see every process's output",
            )
        return str(json.loads(result.read_text())["run_id"])


def worker(job_file: str) -> None:
    """One rank: load the shard, profile in lockstep, rank 0 stores the run and its tables."""
    import torch.distributed as dist

    from infermeter.instrument.collectives import CollectiveRecorder
    from infermeter.models.loader import load_model
    from infermeter.run.profiling import profile
    from infermeter.store import Store

    die_with_parent()  # torchrun: a rank never outlives it
    job = json.loads(Path(job_file).read_text())
    config = pickle.loads(Path(job["config"]).read_bytes()).validate()
    loaded = load_model(job["folder"], dtype=config.dtype, device="cpu", tp_plan="auto")
    loaded.info = replace(loaded.info, spec=config.model)  # the model asked for, not the folder
    rank, world = dist.get_rank(), dist.get_world_size()
    backend = dist.get_backend()
    recorder = CollectiveRecorder(loaded.model)

    def before_finish(run: Any) -> None:
        run.layers["collectives"] = recorder.rows()
        run.layers["communication"] = recorder.phases()
        run.notes.append(
            f"tensor parallel over {world} processes ({backend}): collectives counted over "
            "every forward, warm-up included"
            + ("; timed with the device synchronised around each" if backend == "nccl" else "")
        )

    with recorder:
        run = profile(
            config,
            sink=Store(job["db"]) if rank == 0 else None,
            loaded=loaded,
            knobs={"tp": world},
            before_finish=before_finish if rank == 0 else None,
        )
    if rank == 0:
        Path(job["result"]).write_text(json.dumps({"run_id": run.run_id}))
    dist.barrier()
    dist.destroy_process_group()


def launch(argv: list[str]) -> None:
    """`--launch PARENT TORCHRUN-ARGS...`: die with PARENT, then become torchrun (exec)."""
    die_with_parent(int(argv[0]))
    os.execv(sys.executable, [sys.executable, "-m", "torch.distributed.run", *argv[1:]])


def main() -> None:
    """The program torchrun starts: `python -m infermeter.experiments.tensor_parallel JOB`."""
    if len(sys.argv) > 1 and sys.argv[1] == "--launch":
        launch(sys.argv[2:])
        return
    if os.environ.get("INFERMETER_DEBUG") is None:
        import logging

        logging.disable(logging.WARNING)
    worker(sys.argv[1])


if __name__ == "__main__":
    main()
