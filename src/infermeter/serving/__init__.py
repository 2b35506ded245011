"""Load on a server (`infermeter load`): in-process or at an OpenAI-compatible endpoint.

Why its own package: serving is half of what infermeter is used for, and its parts (the load
spec and arrivals, the clients, the batch-state recorder, capacity search, server metrics,
energy per request, the client's self-check and the server's drift verdict) belong together
and apart from the profiler in `run/`. It sits above `run/` (signals, progress, results) and
below `analysis/`, which reads its `Request` rows to simulate a load.
"""
