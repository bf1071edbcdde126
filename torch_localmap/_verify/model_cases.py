"""Cases from the joint graphs of the reference models (torch_localmap.models), traced in
float64 and run on real random data so every op sees consistent inputs, at tiny sizes and
at "edge" sizes (odd, size-1 and smaller-than-mesh dims)."""
from __future__ import annotations

import torch

from .op_case import cases_from_graph


def model_cases(name: str, config, batch: int, seed: int, source: str) -> list:
    from .. import models
    from .._trace import trace_joint

    module, inputs = models.build(name, config=config, batch=batch, seed=seed)
    module = module.to(torch.float64)
    inputs = tuple(x.to(torch.float64) if x.is_floating_point() else x for x in inputs)
    joint = trace_joint(module, inputs)
    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    from .._torch_private import descriptors

    gen = torch.Generator().manual_seed(seed + 7)
    values = []
    for n in joint.gm.graph.nodes:
        if n.op != "placeholder":
            continue
        role, target = descriptors.describe_input(n.meta.get("desc"))
        if role == "param":
            values.append(params[target].detach().clone())
        elif role == "buffer":
            values.append(buffers[target].detach().clone())
        elif role == "input":
            values.append(inputs[int(target)])
        else:  # tangent: a random cotangent exercises the backward more than ones would
            meta = n.meta["val"]
            values.append(torch.randn(meta.shape, dtype=meta.dtype, generator=gen))
    return cases_from_graph(joint.gm, values, source)


def edge_configs() -> list:
    """(model, config, batch): sizes that are odd, 1, or smaller than the mesh dims."""
    from ..models import cnn, llama, moe, vit

    return [
        ("llama", llama.LlamaConfig.tiny(dim=12, n_layers=1, n_heads=3, n_kv_heads=1, ffn_dim=7, vocab_size=5,
                                         seq_len=3), 1),
        ("llama_tied", llama.LlamaConfig.tiny(dim=8, n_layers=1, n_heads=2, n_kv_heads=2, ffn_dim=5, vocab_size=7,
                                              seq_len=1, tie_embeddings=True), 3),
        ("moe", moe.MoEConfig.tiny(dim=6, n_layers=1, n_heads=1, n_experts=3, top_k=1, expert_ffn_dim=5,
                                   vocab_size=7, seq_len=3), 1),
        ("vit", vit.ViTConfig.tiny(image_size=6, patch_size=3, channels=1, dim=6, n_layers=1, n_heads=3,
                                   mlp_dim=5, n_classes=3), 1),
        ("cnn", cnn.CNNConfig.tiny(image_size=5, in_channels=1, widths=(3,), n_classes=3), 3),
    ]
