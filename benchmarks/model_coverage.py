"""Which models users train plan without a fallback: timm classifiers and Hugging Face
models beyond the test zoo, each from a tiny config with random weights, planned for one
training step on a simulated mesh (no process group). Prints one line per model -- ok, the
ops that fell back to replicate, or why it did not trace -- and a summary; exits 1 when an
op fell back.

    PYTHONPATH=$PWD python benchmarks/model_coverage.py [--mesh 2x2] [--only NAME ...]

Needs the test dependencies (transformers, timm: `make install`). Models whose own code
cannot be traced (a Python test of a drawn number, `.tolist()`) are listed as such; they
are the model's limits, not a fallback.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "python"))
import zoo  # noqa: E402  (the test zoo's tiny-config helpers)

# timm classifiers: (name, create_model kwargs, image size)
TIMM = [
    ("resnet50", {}, 64), ("resnetv2_50x1_bit", {}, 32), ("densenet121", {}, 64), ("regnetx_002", {}, 64),
    ("convnextv2_atto", {}, 64), ("mobilenetv3_small_050", {}, 64), ("levit_128s", {"img_size": 32}, 32),
    ("poolformer_s12", {}, 64), ("ghostnet_050", {}, 64), ("maxvit_nano_rw_256", {"img_size": 64}, 64),
    ("coatnet_nano_rw_224", {"img_size": 64}, 64), ("edgenext_xx_small", {}, 64), ("xcit_nano_12_p16_224", {}, 32),
    ("pit_ti_224", {"img_size": 64}, 64), ("twins_pcpvt_small", {}, 64), ("pvt_v2_b0", {}, 64), ("dla34", {}, 64),
    ("res2net50_14w_8s", {}, 64), ("gcvit_xxtiny", {"img_size": 64}, 64), ("fastvit_t8", {}, 64),
    ("repvit_m0_9", {}, 64), ("hiera_tiny_224", {"img_size": 64}, 64), ("mvitv2_tiny", {"img_size": 64}, 64),
    ("gmlp_ti16_224", {"img_size": 32}, 32), ("resmlp_12_224", {"img_size": 32}, 32), ("convmixer_768_32", {}, 32),
    ("nf_resnet26", {}, 64), ("mambaout_femto", {}, 64), ("dm_nfnet_f0", {}, 64),
    ("vit_small_patch16_rope_224", {"img_size": 32, "patch_size": 8}, 32), ("nextvit_small", {}, 64),
    ("efficientvit_b0", {}, 64), ("mobileone_s0", {}, 64), ("davit_tiny", {}, 64),
    ("focalnet_tiny_srf", {}, 64), ("inception_next_tiny", {}, 64), ("starnet_s1", {}, 64),
    ("hgnetv2_b0", {}, 64), ("volo_d1_224", {}, 224), ("deit3_small_patch16_224", {"img_size": 64}, 64),
    ("beitv2_base_patch16_224", {"img_size": 64}, 64), ("nest_tiny", {}, 224), ("caformer_s18", {}, 64),
    ("crossvit_9_240", {}, 240), ("convit_tiny", {"img_size": 64}, 64), ("tresnet_m", {}, 64), ("repvgg_a0", {}, 64),
    ("botnet26t_256", {}, 256), ("test_vit", {"img_size": 64}, 64),
]

# Hugging Face causal LMs: config class prefix -> config kwargs beyond the zoo's tiny sizes
HF_DECODERS = {
    "Mistral": {}, "Qwen2": {}, "Qwen3": {"head_dim": 8}, "Gemma": {"head_dim": 8}, "Gemma3Text": {"head_dim": 8},
    "Phi": {}, "Phi3": {"pad_token_id": 0}, "Olmo2": {}, "StableLm": {}, "GPTNeoX": {}, "Granite": {}, "Cohere": {},
    "Starcoder2": {}, "Nemotron": {}, "Exaone4": {}, "Ernie4_5": {"head_dim": 8}, "Helium": {"head_dim": 8},
    "SmolLM3": {"pad_token_id": 0}, "Glm4": {"pad_token_id": 0}, "Olmoe": {"num_experts": 4, "num_experts_per_tok": 2},
    "Qwen3Moe": {"head_dim": 8, "moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2},
    "Phimoe": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "GraniteMoe": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "Llama4Text": {"intermediate_size_mlp": 64, "head_dim": 8, "num_local_experts": 2},
    "Bamba": {"mamba_d_state": 8, "mamba_n_heads": 8, "mamba_d_head": 8, "mamba_n_groups": 1, "attn_layer_indices": [1]},
    "FalconH1": {"mamba_d_ssm": 32, "mamba_n_heads": 4, "mamba_d_head": 8, "mamba_n_groups": 1, "mamba_d_state": 8,
                 "head_dim": 8},
    "Qwen3Next": {"head_dim": 8, "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 8,
                  "linear_value_head_dim": 8, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                  "shared_expert_intermediate_size": 16, "layer_types": ["linear_attention", "full_attention"]},
    "RecurrentGemma": {"head_dim": 8, "lru_width": 32, "block_types": ["recurrent", "attention"],
                       "attention_window_size": 16},
    "Lfm2": {"layer_types": ["conv", "full_attention"]},
    "DeepseekV2": {"num_key_value_heads": 4, "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 4,
                   "qk_nope_head_dim": 8, "v_head_dim": 8, "head_dim": 4, "n_routed_experts": 4,
                   "num_experts_per_tok": 2, "moe_intermediate_size": 16, "first_k_dense_replace": 1},
    "GPTJ": {"n_positions": 64, "rotary_dim": 4}, "CodeGen": {"n_positions": 64, "rotary_dim": 4},
    "OPT": {}, "Olmo3": {"head_dim": 8}, "Cohere2": {"head_dim": 8}, "MiniMax": {"head_dim": 8},
    "Ministral": {"head_dim": 8}, "GPTBigCode": {}, "NemotronH": {"head_dim": 8}, "Glm4Moe": {"head_dim": 8},
    "HunYuanMoEV1": {"head_dim": 8}, "DiffLlama": {"head_dim": 8},
}
# those whose attention transformers runs eagerly only
HF_EAGER = {"Gemma2": {"head_dim": 8}, "Bloom": {}, "Mamba": {"state_size": 8},
            "Mamba2": {"num_heads": 4, "head_dim": 16, "n_groups": 1, "state_size": 8},
            "GptOss": {"num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 8,
                       "layer_types": ["sliding_attention", "full_attention"]}}

# Hugging Face encoders (masked LM heads, called with labels), then sequence-to-sequence models
# (their decoders fed the labels shifted right): config class prefix -> config kwargs beyond the
# tiny sizes, and the attention implementation their code offers.
HF_ENCODERS = {
    "Albert": ({"embedding_size": 16}, "sdpa"), "BigBird": ({"attention_type": "original_full"}, "eager"),
    "Camembert": ({}, "sdpa"), "ConvBert": ({}, "eager"), "Deberta": ({}, "eager"), "DebertaV2": ({}, "eager"),
    "DistilBert": ({"dim": 32, "n_layers": 2, "n_heads": 4, "hidden_dim": 64}, "sdpa"), "Electra": ({}, "sdpa"),
    "Ernie": ({}, "sdpa"), "Esm": ({}, "sdpa"), "FNet": ({}, "eager"), "MPNet": ({}, "eager"),
    "MegatronBert": ({}, "eager"), "MobileBert": ({"embedding_size": 16, "intra_bottleneck_size": 16,
                                                   "true_hidden_size": 16}, "eager"),
    "ModernBert": ({}, "sdpa"), "RemBert": ({"input_embedding_size": 16, "output_embedding_size": 16}, "eager"),
    "RoFormer": ({}, "eager"), "Roberta": ({}, "sdpa"), "SqueezeBert": ({"embedding_size": 32}, "eager"), "Tapas": ({}, "eager"),
    "XLMRoberta": ({}, "sdpa"), "Nystromformer": ({}, "eager"),
}
HF_SEQ2SEQ = {
    "Bart": {}, "Blenderbot": {}, "BlenderbotSmall": {}, "MBart": {}, "Mvp": {}, "PLBart": {}, "Pegasus": {},
    "PegasusX": {}, "BigBirdPegasus": {"attention_type": "original_full"}, "MT5": {}, "UMT5": {},
}
_SEQ2SEQ_SIZES = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                      decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_layers=2,
                      num_decoder_layers=2, num_heads=4, d_ff=64, d_kv=8, decoder_start_token_id=0)


_TINY = dict(vocab_size=zoo.VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64, intermediate_size=64)


def _hf_text(config_prefix, model_class, sizes, extra, attention):
    """A Hugging Face model of class `model_class` from a tiny `<config_prefix>Config`, called
    with token ids as its labels (a causal LM shifts them, a masked LM scores every position, a
    sequence-to-sequence model's decoder takes them shifted right)."""
    def build():
        import transformers

        cfg = getattr(transformers, config_prefix + "Config")(**{**sizes, **extra})
        cfg._attn_implementation = attention
        ids = zoo._tokens(0)
        return getattr(transformers, model_class)(cfg), (), {"input_ids": ids, "labels": ids}
    return build


def _hf_encoder(prefix, extra, attention):
    return _hf_text(prefix, prefix + "ForMaskedLM", dict(_TINY, pad_token_id=0), extra, attention)


def _hf_seq2seq(prefix, extra):
    sizes = dict(vocab_size=zoo.VOCAB, max_position_embeddings=64, pad_token_id=0, **_SEQ2SEQ_SIZES)
    return _hf_text(prefix, prefix + "ForConditionalGeneration", sizes, extra, "eager")


def _hf_decoder(prefix, extra, attention):
    name = prefix[:-4] if prefix.endswith("Text") else prefix
    return _hf_text(prefix, name + "ForCausalLM", dict(_TINY, num_key_value_heads=2), extra, attention)


def _hf_vision(config, model, size=32, **extra):
    def build():
        import transformers

        cfg = getattr(transformers, config)(num_labels=5, **extra)
        images = torch.randn(4, 3, size, size, generator=torch.Generator().manual_seed(0))
        return getattr(transformers, model)(cfg), (), {"pixel_values": images, "labels": torch.arange(4) % 5}
    return build


_SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
HF_OTHER = {
    "hf_vit": _hf_vision("ViTConfig", "ViTForImageClassification", image_size=32, patch_size=8, **_SMALL),
    "hf_swin": _hf_vision("SwinConfig", "SwinForImageClassification", image_size=32, patch_size=2, embed_dim=16,
                          depths=[1, 1], num_heads=[2, 4], window_size=4),
    "hf_segformer": _hf_vision("SegformerConfig", "SegformerForImageClassification", num_encoder_blocks=2,
                               depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[7, 3], strides=[4, 2],
                               num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=16),
    "hf_beit": _hf_vision("BeitConfig", "BeitForImageClassification", image_size=32, patch_size=8, **_SMALL),
    "hf_dinov2": _hf_vision("Dinov2Config", "Dinov2ForImageClassification", image_size=32, patch_size=8,
                            hidden_size=32, num_hidden_layers=2, num_attention_heads=4),
}


def _siglip():
    import transformers

    small = dict(_SMALL, max_position_embeddings=64)
    cfg = transformers.SiglipConfig(text_config=dict(vocab_size=zoo.VOCAB, **small),
                                    vision_config=dict(image_size=32, patch_size=8, **_SMALL))
    return transformers.SiglipModel(cfg), (), {"input_ids": zoo._tokens(0), "pixel_values": torch.randn(4, 3, 32, 32),
                                               "return_loss": True}


def _patchtst():
    import transformers

    cfg = transformers.PatchTSTConfig(num_input_channels=3, context_length=32, patch_length=8, patch_stride=8,
                                      prediction_length=8, d_model=16, num_attention_heads=2, num_hidden_layers=2,
                                      ffn_dim=32)
    return transformers.PatchTSTForPrediction(cfg), (), {"past_values": torch.randn(4, 32, 3),
                                                         "future_values": torch.randn(4, 8, 3)}


HF_OTHER.update({"hf_siglip": _siglip, "hf_patchtst": _patchtst})


def _timm(name, kwargs, size):
    def build():
        timm = zoo._import_timm()
        model = timm.create_model(name, pretrained=False, num_classes=10, **kwargs)
        return model, (torch.randn(2, 3, size, size),), {}
    return build


def _loss_of_output(model):
    """A classifier's logits scored outside the model, as zoo.py's timm cases do."""
    class Scored(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, *args, **kwargs):
            out = self.inner(*args, **kwargs)
            return out.loss if hasattr(out, "loss") and out.loss is not None else F.cross_entropy(
                out, torch.zeros(out.shape[0], dtype=torch.long, device=out.device))
    return Scored()


def builders() -> dict:
    out = {f"timm/{n}": _timm(n, kw, s) for n, kw, s in TIMM}
    out.update({f"hf/{p}": _hf_decoder(p, kw, "sdpa") for p, kw in HF_DECODERS.items()})
    out.update({f"hf/{p}": _hf_decoder(p, kw, "eager") for p, kw in HF_EAGER.items()})
    out.update({f"hf/{p}ForMaskedLM": _hf_encoder(p, kw, a) for p, (kw, a) in HF_ENCODERS.items()})
    out.update({f"hf/{p}ForConditionalGeneration": _hf_seq2seq(p, kw) for p, kw in HF_SEQ2SEQ.items()})
    out.update({f"hf/{n}": b for n, b in HF_OTHER.items()})
    return out


def main(argv=None) -> int:
    from torch_localmap.plan import plan_module

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mesh", default="2x2", help="simulated mesh shape, e.g. 2x2 or 8x8")
    p.add_argument("--only", nargs="*", help="model names as listed (timm/<name>, hf/<name>)")
    args = p.parse_args(argv)
    mesh = tuple(int(s) for s in args.mesh.split("x"))
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()  # the tiny configs' token ids are out of their vocabularies
    ok, fell, untraced = [], {}, {}
    for name, build in builders().items():
        if args.only and name not in args.only:
            continue
        t0 = time.perf_counter()
        try:
            torch.manual_seed(0)
            model, margs, mkwargs = build()
            model = _loss_of_output(model).train()
            plan = plan_module(model, mesh, margs, mkwargs, time_limit=3)
            ops = list(plan.summary.fallback_ops)
        except Exception as e:  # noqa: BLE001  (each model's failure is reported, the sweep goes on)
            untraced[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            print(f"{name:40s} did not plan ({time.perf_counter() - t0:.1f} s): {untraced[name]}", flush=True)
            continue
        (fell.__setitem__(name, ops) if ops else ok.append(name))
        print(f"{name:40s} {'FALLBACK ' + ', '.join(ops) if ops else 'ok'} ({time.perf_counter() - t0:.1f} s)",
              flush=True)
    print(f"\n{len(ok)} planned without a fallback, {len(fell)} with one, {len(untraced)} did not plan "
          f"(mesh {args.mesh}, torch {torch.__version__})")
    return 1 if fell else 0


if __name__ == "__main__":
    sys.exit(main())
