"""How the planner and executor see local_map regions (filled in by the local_map HOP work)."""


def node_extra(fx_node):
    """Extra IR fields for a node (fixed placements of local_map regions), or None."""
    return None


def run_region_local(fx_node, args, kwargs):
    """(True, outputs) when `fx_node` is a local_map region run on local tensors, else (False, None)."""
    return False, None
