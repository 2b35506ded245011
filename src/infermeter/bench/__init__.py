"""Microbenchmarks beside a profile: attention kernels and whole-model forward and training.

`infermeter bench attention` and `infermeter bench model` (`cli/bench_cmd.py`); each writes one
JSON document ({meta, summary, all_samples}) that `infermeter report` renders.
"""
