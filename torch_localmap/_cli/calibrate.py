"""`python -m torch_localmap calibrate`: measure this machine's device for the cost model."""
from ._common import DeviceChoices

COMMAND = "calibrate"
HELP = "measure matmul/attention throughput, copy bandwidth and kernel overhead into a calibration profile"


def add_arguments(parser):
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--table", default=None, choices=DeviceChoices(), metavar="DEVICE",
                        help="cost-model device the profile overrides: %(choices)s (default: H100 for cuda, cpu "
                             "for cpu)")
    parser.add_argument("--out", required=True, help="where to write the profile JSON")
    parser.add_argument("--matmul-n", type=int, default=4096, help="square matmul size (default 4096)")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions, best kept (default 5)")


def run(args):
    import json

    import torch

    from .._calibrate import device_profile
    from ..cost_model import load_cost_model

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("calibrate: --device cuda but torch.cuda.is_available() is False on this machine")
    table = args.table or ("H100" if device.type == "cuda" else "cpu")
    n = args.matmul_n
    profile = device_profile(device, table, matmul_n=n, reps=args.reps,
                             attn_shape=(4, 8, min(1024, 2 * n), 64), copy_bytes=min(1 << 28, 64 * n * n))
    with open(args.out, "w") as f:
        json.dump(profile, f, indent=1)
    load_cost_model(table, args.out)  # proves the profile is valid for the cost model
    ref, got = profile["meta"]["table"], profile["device"]
    print(f"measured on {profile['meta']['measured_on']} vs cost-model table '{table}' (rate x efficiency):")
    for key, eff in (("peak_flops_fp32", "compute_efficiency"), ("peak_flops_bf16", "compute_efficiency"),
                     ("peak_flops_fp64", "compute_efficiency"), ("memory_bandwidth", "memory_efficiency")):
        if key in got:
            print(f"  {key:18} measured {got[key]:.3e}   table {ref[key] * ref[eff]:.3e}")
    print(f"  {'kernel_overhead_s':18} measured {got['kernel_overhead_s']:.3e}   table {ref['kernel_overhead_s']:.3e}")
    print(f"  {'attention (bf16/fp32)':18} measured {profile['meta']['attention_flops']:.3e} flop/s")
    print(f"wrote {args.out}; use it with plan_module(..., device='{table}', calibration='{args.out}')")
    return 0
