"""Per-rank execution: the pieces the SPMD program runs (internal, not public API)."""
