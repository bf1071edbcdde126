"""The model zoo of the front-door tests: models people train, built from tiny configs with
random weights, called the way their libraries' documentation calls them.

Each entry builds a Case: the model, its call's args and kwargs, and `loss(output, target)`
-- `output.loss` for Hugging Face models that take `labels` (target None), a loss computed
by the user outside the model for timm and the torchtitan-style model (target: the labels).

transformers and timm are pinned test dependencies (Makefile TEST_REQUIREMENTS). timm
imports torchvision, whose PyPI wheels are CUDA builds; `make install` installs a start-up
hook (tools/torchvision_cpu_shim.py) that makes it importable next to the CPU torch.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch
import torch.nn.functional as F

BATCH, SEQ, VOCAB = 4, 12, 96


class Case(NamedTuple):
    model: torch.nn.Module
    args: tuple
    kwargs: dict
    target: Any  # labels for a loss outside the model, or None
    loss: Callable  # loss(output, target) -> scalar tensor


def _import_timm():
    try:
        import timm
    except Exception as e:  # noqa: BLE001
        raise ImportError(f"timm does not import ({e}); `make install` installs it with the torchvision "
                          "shim for the CPU torch (tools/torchvision_cpu_shim.py)") from e
    return timm


def _tokens(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)


def _hf_loss(out, _target):
    return out.loss


def hf_llama(seed=0, layers=2):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64, attn_implementation="sdpa")
    ids = _tokens(seed)
    return Case(LlamaForCausalLM(cfg), (), {"input_ids": ids, "labels": ids}, None, _hf_loss)


def gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=64, bos_token_id=0,
                     eos_token_id=0, attn_implementation="sdpa")
    ids = _tokens(seed)
    return Case(GPT2LMHeadModel(cfg), (), {"input_ids": ids, "labels": ids}, None, _hf_loss)


def bert(seed=0):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                     vocab_size=VOCAB, max_position_embeddings=64, attn_implementation="sdpa")
    ids = _tokens(seed)
    labels = ids.clone()
    labels[:, ::3] = -100
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[0, -3:] = 0  # padding in one sequence: the attention mask matters
    return Case(BertForMaskedLM(cfg), (), {"input_ids": ids, "attention_mask": mask, "labels": labels}, None, _hf_loss)


def mixtral(seed=0):
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(seed)
    cfg = MixtralConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64, num_local_experts=4,
                        num_experts_per_tok=2, attn_implementation="sdpa")
    ids = _tokens(seed)
    return Case(MixtralForCausalLM(cfg), (), {"input_ids": ids, "labels": ids}, None, _hf_loss)


def t5(seed=0):
    """An encoder-decoder called as its documentation shows: `labels` shifted into decoder
    inputs inside the model, the default `use_cache` (an EncoderDecoderCache in the output)."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    cfg = T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                   relative_attention_num_buckets=8, relative_attention_max_distance=16, decoder_start_token_id=0,
                   pad_token_id=0)
    ids = _tokens(seed)
    labels = _tokens(seed + 1)
    labels[1, -2:] = -100  # ignored positions: the shift turns them into pad tokens
    return Case(T5ForConditionalGeneration(cfg), (), {"input_ids": ids, "labels": labels}, None, _hf_loss)


def _classification_loss(out, labels):
    return F.cross_entropy(out, labels)


def _classes(seed, n):
    g = torch.Generator().manual_seed(seed + 123)
    return torch.randint(0, n, (BATCH,), generator=g)


def _timm_classifier(name, **kwargs):
    """A timm classifier of 10 classes on a batch of 32x32 images, its loss outside the model."""
    def build(seed=0):
        timm = _import_timm()
        torch.manual_seed(seed)
        model = timm.create_model(name, pretrained=False, num_classes=10, **kwargs)
        g = torch.Generator().manual_seed(seed)
        return Case(model, (torch.randn(BATCH, 3, 32, 32, generator=g),), {}, _classes(seed, 10),
                    _classification_loss)
    return build


# dropout on: its masks must equal the single-device ones (docs/user_guide.md, "Randomness")
vit = _timm_classifier("vit_tiny_patch16_224", img_size=32, patch_size=8, depth=2, drop_rate=0.1,
                       proj_drop_rate=0.1, attn_drop_rate=0.1)
resnet = _timm_classifier("resnet18")  # BatchNorm, training mode
# DropPath on (per-sample keep masks drawn by bernoulli); the pooling head's strided views
convnext = _timm_classifier("convnext_atto", drop_path_rate=0.1)


def _lm_loss(out, tokens):
    return F.cross_entropy(out.flatten(0, 1), tokens.flatten())


def titan_llama(seed=0):
    from torch_localmap.models.titan_llama import TitanConfig, TitanLlama

    torch.manual_seed(seed)
    cfg = TitanConfig.debug(vocab_size=VOCAB)
    tokens = _tokens(seed)
    return Case(TitanLlama(cfg), (tokens,), {}, tokens, _lm_loss)


def _hf_decoder(config_name, model_name, attention="sdpa", **extra):
    """A Hugging Face causal LM (or masked LM) from a tiny config of its own class, called with labels."""
    def build(seed=0):
        import transformers

        torch.manual_seed(seed)
        sizes = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     max_position_embeddings=64)
        cfg = getattr(transformers, config_name)(**{**sizes, **extra})
        cfg._attn_implementation = attention
        ids = _tokens(seed)
        return Case(getattr(transformers, model_name)(cfg), (), {"input_ids": ids, "labels": ids}, None, _hf_loss)
    return build


def bart(seed=0):
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(seed)
    cfg = BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
    ids = _tokens(seed)
    return Case(BartForConditionalGeneration(cfg), (), {"input_ids": ids, "labels": _tokens(seed + 1)}, None, _hf_loss)


def whisper(seed=0):
    """A speech encoder-decoder: log-mel features in, labels shifted into decoder inputs
    (its convolutions' front end, and decoder positions tiled over the batch by `repeat`)."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(seed)
    cfg = WhisperConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8,
                        max_source_positions=16, max_target_positions=32, pad_token_id=0, bos_token_id=1,
                        eos_token_id=2, decoder_start_token_id=1)
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(BATCH, 8, 32, generator=g)  # 32 frames: two stride-2 convolutions' 16 positions
    return Case(WhisperForConditionalGeneration(cfg), (), {"input_features": features, "labels": _tokens(seed)}, None,
                _hf_loss)


# More architectures, planned only (test_zoo's simulated 8x8 mesh): an MoE with a shared
# expert and per-head norms, a post-norm encoder-decoder, shifted-window attention,
# depthwise convolutions with squeeze-excitation and BatchNorm, a speech encoder-decoder,
# a vision transformer that upsamples, low-rank attention with routed experts, and a hybrid
# of Mamba and attention layers.
# (qwen2_moe, falcon, bart and swin also matched one process on 4 ranks, 2026-12-05;
# whisper, deepseek_v3 and jamba too, 2026-12-06. efficientnet is no parity case: its losses drift
# from step 2 as much as its own single-process runs do with 1 thread against 2. Nor is
# mobilevit: its planned run matched, but forced sharding left 3 of one convolution's
# 115,200 weights 4e-5 off after 3 AdamW steps, where 1 and 2 threads differ as much.)
PLAN_ONLY = {
    "qwen2_moe": _hf_decoder("Qwen2MoeConfig", "Qwen2MoeForCausalLM", intermediate_size=64, num_key_value_heads=2,
                             moe_intermediate_size=32, shared_expert_intermediate_size=32, num_experts=4,
                             num_experts_per_tok=2),
    "qwen3": _hf_decoder("Qwen3Config", "Qwen3ForCausalLM", intermediate_size=64, num_key_value_heads=2, head_dim=8),
    "falcon": _hf_decoder("FalconConfig", "FalconForCausalLM"),
    "bart": bart,
    "whisper": whisper,
    "swin": _timm_classifier("swin_tiny_patch4_window7_224", img_size=32, patch_size=2, window_size=4,
                             depths=(1, 1), num_heads=(2, 4), embed_dim=32),
    "efficientnet": _timm_classifier("efficientnet_b0"),
    # GroupNorm of one group (native_group_norm and its backward had no rule: replicated)
    "poolformer": _timm_classifier("poolformer_s12"),
    # interpolate's unchecked gathers (None entries in the index list) and their scatters
    "mobilevit": _timm_classifier("mobilevit_xxs"),
    # low-rank attention (its backward copies into new_empty_strided buffers), routed and shared experts
    "deepseek_v3": _hf_decoder("DeepseekV3Config", "DeepseekV3ForCausalLM", intermediate_size=64,
                               moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2,
                               n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=8, q_lora_rank=8,
                               qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8, n_group=1, topk_group=1),
    # Mamba layers beside attention; its DynamicCache (returned by default) holds both kinds
    "jamba": _hf_decoder("JambaConfig", "JambaForCausalLM", intermediate_size=64, num_key_value_heads=2,
                         num_experts=2, expert_layer_period=2, attn_layer_period=2, attn_layer_offset=1,
                         mamba_d_state=4, mamba_dt_rank=4, use_mamba_kernels=False),
    # a looped decoder that deep-copies its cache layers once per loop in forward
    "dory": _hf_decoder("DoryConfig", "DoryForCausalLM", intermediate_size=64, num_key_value_heads=2,
                        num_hidden_layers=4, n_input_layers=1, n_recurrent_layers=2, n_output_layers=1,
                        n_recurrent_loops=2),
    # chunked linear attention: an identity matrix (torch.eye) added per chunk
    "lara_mini": _hf_decoder("LaraMiniConfig", "LaraMiniForCausalLM", intermediate_size=64, num_key_value_heads=2),
}

MODELS = {
    # token mixing by a 2-D Fourier transform over (sequence, hidden): _fft_c2c and its backward
    "fnet": _hf_decoder("FNetConfig", "FNetForMaskedLM", attention="eager", intermediate_size=64),
    # table cells' column ranks by segment reductions (scatter_reduce, amin)
    "tapas": _hf_decoder("TapasConfig", "TapasForMaskedLM", attention="eager", intermediate_size=64),
    "hf_llama": hf_llama,
    "gpt2": gpt2,
    "bert": bert,
    "mixtral": mixtral,
    "t5": t5,
    "vit": vit,
    "resnet": resnet,
    "convnext": convnext,
    "titan_llama": titan_llama,
}
