"""Reference models that define what "complete" strategy coverage means.

REGISTRY maps a name to a ModelSpec: the config class (with `tiny()` and a
real-size preset), a builder and an example-input maker. Every model's
forward(inputs, targets) returns a scalar training loss.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import torch

from . import cnn, llama, moe, vit


@dataclass(frozen=True)
class ModelSpec:
    name: str
    config_cls: type
    builder: Callable  # config -> nn.Module
    example_inputs: Callable  # (config, batch, generator=None) -> tuple of tensors
    full_size: str  # name of the real-size preset classmethod on config_cls

    def tiny(self, **overrides):
        return self.config_cls.tiny(**overrides)

    def full(self):
        return getattr(self.config_cls, self.full_size)()


REGISTRY = {
    "llama": ModelSpec("llama", llama.LlamaConfig, llama.Llama, llama.example_inputs, "llama3_8b"),
    "llama_tied": ModelSpec("llama_tied", llama.LlamaConfig, llama.Llama,
                            llama.example_inputs, "llama3_8b"),
    "moe": ModelSpec("moe", moe.MoEConfig, moe.MoETransformer, moe.example_inputs, "mixtral_8x7b"),
    "vit": ModelSpec("vit", vit.ViTConfig, vit.ViT, vit.example_inputs, "vit_b16"),
    "cnn": ModelSpec("cnn", cnn.CNNConfig, cnn.CNN, cnn.example_inputs, "imagenet"),
}
# llama_tied differs only in its config: tied embedding/output weights.
_TIED = {"llama_tied": {"tie_embeddings": True}}
# Sizes by the name users know them (`plan --size 8b`) -> the config preset; "tiny" is every model's.
SIZES = {"llama": {"8b": "llama3_8b", "70b": "llama3_70b", "405b": "llama3_405b"},
         "llama_tied": {"8b": "llama3_8b", "70b": "llama3_70b", "405b": "llama3_405b"},
         "moe": {"8x7b": "mixtral_8x7b"}, "vit": {"b16": "vit_b16"}, "cnn": {"imagenet": "imagenet"}}


def get(name: str) -> ModelSpec:
    if name not in REGISTRY:
        raise ValueError(f"unknown model '{name}'; expected one of {sorted(REGISTRY)}")
    return REGISTRY[name]


def tiny_config(name: str):
    return get(name).tiny(**_TIED.get(name, {}))


def sized_config(name: str, size: str):
    """The config of model `name` at `size`: "tiny" or one of SIZES[name] (e.g. llama "8b")."""
    get(name)
    if size == "tiny":
        return tiny_config(name)
    presets = SIZES.get(name, {})
    if size not in presets:
        raise ValueError(f"model '{name}' has no size '{size}'; expected one of {['tiny', *presets]}")
    return replace(getattr(get(name).config_cls, presets[size])(), **_TIED.get(name, {}))


def build(name: str, config=None, batch: int = 2, seed: int = 0):
    """(module, example_inputs) for model `name`, deterministic in `seed`.

    `config` defaults to the tiny preset. Under a FakeTensorMode the same call
    builds a real-size model without allocating memory.
    """
    spec = get(name)
    cfg = config if config is not None else tiny_config(name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = spec.builder(cfg)
    gen = torch.Generator().manual_seed(seed + 1)
    try:
        inputs = spec.example_inputs(cfg, batch, generator=gen)
    except (TypeError, RuntimeError):  # fake tensor mode: no explicit CPU generator
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 1)
            inputs = spec.example_inputs(cfg, batch)
    return module, inputs
