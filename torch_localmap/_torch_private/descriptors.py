"""What a joint graph's placeholders and outputs are (parameter, buffer, input, tangent,
gradient, mutation): aot_autograd's descriptors read and made.

Written for torch 2.13 (torch._functorch._aot_autograd.descriptors).
"""
from __future__ import annotations


def describe_input(desc) -> tuple[str, str]:
    """(role, target) of a joint-graph placeholder descriptor (torch._functorch._aot_autograd.
    descriptors, 2.13): ("param" | "buffer", FQN), ("input", flat index), ("tangent",
    index of the output it is the gradient of); ("unknown", repr) for anything else."""
    from torch._functorch._aot_autograd import descriptors as d

    if isinstance(desc, d.ParamAOTInput):
        return "param", desc.target
    if isinstance(desc, d.BufferAOTInput):
        return "buffer", desc.target
    if isinstance(desc, d.TangentAOTInput):
        out = desc.output
        return "tangent", str(out.idx) if isinstance(out, d.PlainAOTOutput) else repr(out)
    if isinstance(desc, d.PlainAOTInput):
        return "input", str(desc.idx)
    return "unknown", repr(desc)


def describe_output(desc) -> tuple[str, str]:
    """(role, target) of a joint-graph output descriptor: ("output", index), ("grad", param
    FQN), ("input_grad", flat input index), ("mutation", buffer FQN), ("input_mutation", flat
    input index), ("none", ""); ("unknown", repr) for anything else."""
    from torch._functorch._aot_autograd import descriptors as d

    if desc is None:
        return "none", ""
    if isinstance(desc, d.GradAOTOutput):
        role, name = describe_input(desc.grad_of)
        return ("grad", name) if role == "param" else ("input_grad", name)
    if isinstance(desc, d.PlainAOTOutput):
        return "output", str(desc.idx)
    if isinstance(desc, d.InputMutationAOTOutput):
        role, name = describe_input(desc.mutated_input)
        return ("mutation", name) if role == "buffer" else ("input_mutation", f"{role} {name}")
    return "unknown", repr(desc)


def state_input_desc(kind: str, fqn: str):
    """The placeholder descriptor of parameter (kind "param") or buffer ("buffer") `fqn`."""
    from torch._functorch._aot_autograd import descriptors as d

    return d.ParamAOTInput(fqn) if kind == "param" else d.BufferAOTInput(fqn)


def param_grad_desc(fqn: str):
    """The output descriptor of parameter `fqn`'s gradient."""
    from torch._functorch._aot_autograd import descriptors as d

    return d.GradAOTOutput(d.ParamAOTInput(fqn))
