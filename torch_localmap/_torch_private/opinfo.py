"""torch's OpInfo database, from which the strategy verifier draws op instances.

Written for torch 2.13 (torch.testing._internal.common_methods_invocations).
"""
from __future__ import annotations


def opinfo_database() -> list:
    """torch.testing._internal.common_methods_invocations.op_db (2.13): torch's own OpInfos,
    each with a callable and sample inputs. The strategy verifier draws op instances from
    them for rules the reference models do not reach. Needs the `expecttest` package."""
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db
