"""Where a sweep's points run on Ray: the placement, its settings defined once.

Apart from `ray_sweep.py` so that the CLI builds `sweep`'s Ray options from these fields
without importing the model loader (and torch) at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infermeter.errors import UserError
from infermeter.util.settings import Range, check_ranges, setting


@dataclass(frozen=True)
class RayPlacement:
    """Where and with what each point runs.

    address: None starts a local Ray instance for this sweep; "auto" joins the cluster this
    machine belongs to; anything else is a cluster address (ray://host:10001 or host:6379).
    """

    address: str | None = setting(
        None,
        option="--ray",
        help="Run each point as a Ray task: --ray alone starts a local Ray instance, --ray auto "
        "joins this machine's cluster, --ray ADDRESS another one. Workers write to --db (use "
        "PostgreSQL on a cluster). Needs `pip install 'infermeter[ray]'`.",
    )
    cpus_per_point: float = setting(
        1.0,
        option="--cpus-per-point",
        help="With --ray: CPUs each point reserves.",
        within=Range(0, 4096),
    )
    gpus_per_point: float = setting(
        0.0,
        option="--gpus-per-point",
        help="With --ray: GPUs each point reserves.",
        within=Range(0, 4096),
    )
    accelerator_type: str | None = setting(
        None,
        option="--accelerator-type",
        help="With --ray: run points only on this accelerator type (e.g. H100, A100).",
    )
    node_labels: dict[str, str] = setting(
        option="--node-label",
        help="With --ray: KEY=VALUE a node must carry to run points (repeatable).",
        factory=dict,
    )
    local_cpus: int | None = setting(
        None,
        option="--ray-cpus",
        help="With a local Ray instance: its CPUs (default: all of this machine's).",
        within=Range(1, 4096),
    )

    def validate(self) -> RayPlacement:
        """Every setting in range, and some resource for a point, before Ray starts."""
        check_ranges(self)
        if self.cpus_per_point == 0 and self.gpus_per_point == 0:
            raise UserError(
                "--cpus-per-point 0 / --gpus-per-point 0: a point needs some resource",
                "give --cpus-per-point 1 (the default) or --gpus-per-point 1",
            )
        return self

    def task_options(self) -> dict[str, Any]:
        """Ray `.options()` for a point's task."""
        opts: dict[str, Any] = {"num_cpus": self.cpus_per_point, "num_gpus": self.gpus_per_point}
        if self.accelerator_type:
            opts["accelerator_type"] = self.accelerator_type
        if self.node_labels:
            opts["label_selector"] = dict(self.node_labels)
        return opts
