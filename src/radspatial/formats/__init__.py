"""Data formats of other tools, each read and written in one module (``mirp``: MIRP's)."""
