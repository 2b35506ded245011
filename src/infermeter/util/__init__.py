"""The bottom layer: JSON files, number formatting and timestamps, used by every other layer.

Nothing here imports another infermeter package, torch or transformers.
"""
