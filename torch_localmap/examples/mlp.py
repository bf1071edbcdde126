"""A small MLP regression model whose forward returns a scalar loss."""
import torch
import torch.nn as nn


class MLPRegression(nn.Module):
    def __init__(self, d_in=32, hidden=64, d_out=16, depth=2):
        super().__init__()
        dims = [d_in] + [hidden] * depth + [d_out]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x, y):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = torch.nn.functional.gelu(x)
        return ((x - y) ** 2).mean()


def make_example(batch=16, d_in=32, hidden=64, d_out=16, depth=2, dtype=torch.float32, seed=0):
    """(model, (inputs, targets)), identical on every process for a given seed."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = MLPRegression(d_in, hidden, d_out, depth).to(dtype)
    x = torch.randn(batch, d_in, generator=g, dtype=dtype)
    y = torch.randn(batch, d_out, generator=g, dtype=dtype)
    return model, (x, y)
