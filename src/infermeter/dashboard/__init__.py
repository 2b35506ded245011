"""The live dashboard (`infermeter serve`): runs, sweeps and a live page, safe by default."""

from infermeter.dashboard.app import create_app

__all__ = ["create_app"]
