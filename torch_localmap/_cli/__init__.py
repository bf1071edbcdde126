"""Command modules for `python -m torch_localmap` (discovered automatically)."""
