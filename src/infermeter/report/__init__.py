"""Rendering of stored runs: Chrome/Perfetto traces (tables, figures and HTML come later)."""
