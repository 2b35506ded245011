"""Rendering of stored runs and sweeps: Markdown, HTML, CSV, PNG figures, Chrome traces.

Numbers come from the stored data and from `analysis/`; nothing is measured or analysed here.
"""
