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
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from infermeter.errors import UserError
from infermeter.run.config import RunConfig


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
    from infermeter.models import smollm2
    from infermeter.models.loader import load_model
    from infermeter.models.presets import get_preset

    if get_preset(config.model) is not None:
        lm = load_model(config.model, dtype="float32", device="cpu", seed=config.seed)
        lm.model.save_pretrained(folder)
        lm.tokenizer.save_pretrained(folder)
        return str(folder)
    if config.model.strip().lower() == smollm2.NAME:
        return str(smollm2.ensure_converted()[0])
    return config.model


def profile_tp(config: RunConfig, tp: int, db_url: str) -> str:
    """Run `config` over `tp` processes; the stored run's id."""
    check_plan(config.model, tp)
    with tempfile.TemporaryDirectory(prefix="infermeter-tp-") as tmp:
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
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={tp}", "-m", "infermeter.experiments.tensor_parallel",
               str(job_file)]  # fmt: skip
        threads = max(1, (os.cpu_count() or 1) // tp)
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        result = Path(job["result"])
        if done.returncode != 0 or not result.exists():
            lines = [ln for ln in done.stderr.splitlines() if "Error" in ln or "error:" in ln]
            raise UserError(
                f"the {tp} tensor-parallel processes failed: "
                f"{(lines or done.stderr.splitlines() or ['no output'])[-1].strip()}",
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


def main() -> None:
    """The program torchrun starts: `python -m infermeter.experiments.tensor_parallel JOB`."""
    if os.environ.get("INFERMETER_DEBUG") is None:
        import logging

        logging.disable(logging.WARNING)
    worker(sys.argv[1])


if __name__ == "__main__":
    main()
