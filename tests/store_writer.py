"""A writer process for the store's concurrency tests: `python -m tests.store_writer DB SAMPLES
SECONDS` makes, for SECONDS after its imports, the writes a profile makes to
the store, in a profile's order (a running run, its progress row, each sample as measured with
the live per-layer table, the finished run, the progress row gone), then prints how many runs
it began and how many samples it wrote.

It is the store's own write path without a model: a real `infermeter profile` spends its first
10 s importing torch and transformers, so four of them on two cores wrote one run each in the
test's time; this writes dozens, which is the contention the test is about. A real profile's
writes are checked by the kill trials (`tests/faults_kit.py`), which need the real process.
"""

from __future__ import annotations

import sys
import time


def main(db: str, samples: int, duration_s: float) -> None:
    import numpy as np

    from infermeter import Store
    from tests.helpers import history_run

    store = Store(db)
    until = time.monotonic() + duration_s  # after the imports, which take seconds on a busy host
    rng = np.random.default_rng()
    runs = written = 0
    while time.monotonic() < until:
        result = history_run(runs, 5.0, rng)
        result.status = "running"
        kept = list(result.samples[:samples])
        result.samples = []
        result.run_id = store.begin_run(result)
        runs += 1
        key = f"writer-{result.run_id}"
        for done, smp in enumerate(kept):
            state = {"run_id": result.run_id, "model": "tiny-llama", "stage": "sample"}
            store.progress(key, {**state, "done": done, "total": samples, "tokens": 0})
            store.add_sample(result.run_id, smp)
            store.live_layers(result.run_id, [{"layer": 0, "phase": "decode", "mean_ms": 1.0}])
            result.samples.append(smp)
            written += 1
        result.status = "finished"
        store.finish_run(result)
        store.progress(key, None)
    print(runs, written)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
