#!/usr/bin/env bash
# `make test-compat TORCH=2.11.0`: the package against another torch of the supported range,
# in a virtual environment of its own (build/compat/torch-$TORCH), from a copy of the source
# (so the main tree's extension, built for the main venv's torch, is never touched):
# the extension's build against that torch, then a smoke subset -- plan and solve, the ops'
# opcheck and 4-rank gradcheck, the release shims (test_torch_compat; test_local_tensors for the
# DTensor state's autograd node), a Hugging Face model on 4 ranks against
# one process through parallelize and the compile backend. The GoogleTests are not
# rerun: csrc/core is torch-free, so they test the same code under every torch.
#   TORCH=2.15.0 PYTHON=python3 JOBS=2 bash tools/test_compat.sh
# CLEAN=1 removes the venv and source copy afterwards, pass or fail (5-6 GB each with a default
# torch wheel; CI sets it, so its two compat venvs never sit on the disk together).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${TORCH:?set TORCH to a torch release of the supported range, e.g. TORCH=2.11.0}"
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-2}
DIR="$ROOT/build/compat/torch-$TORCH"
VENV_GIVEN=${VENV:+1}
VENV=${VENV:-$DIR/venv}  # an existing venv with that torch may be given (never removed)
SRC="$DIR/src"
CLEAN=${CLEAN:-0}
t0=$SECONDS
if [ "$CLEAN" = 1 ]; then
  trap 'if [ -z "$VENV_GIVEN" ]; then rm -rf "$DIR"; else rm -rf "$SRC"; fi' EXIT
fi
mkdir -p "$DIR"
if [ ! -x "$VENV/bin/python" ]; then
  # A default torch wheel with its CUDA libraries takes about 6 GB: say so before pip fails
  # halfway with ENOSPC.
  free_kb=$(df -Pk "$DIR" | awk 'NR==2 {print $4}')
  if [ "$free_kb" -lt $((7 * 1024 * 1024)) ]; then
    echo "test-compat torch $TORCH: only $((free_kb / 1024)) MiB free under $DIR; its venv needs about 7 GiB" >&2
    exit 1
  fi
  "$PYTHON" -m venv "$VENV"
fi
# The machine-wide pip constraint caps torch below the newest releases: lifted for this
# venv, which pins its own torch. Test pins as the Makefile's.
PIP_CONSTRAINT=/dev/null "$VENV/bin/python" -m pip install -q "torch==$TORCH" "numpy>=1.24,<3" "highspy>=1.7,<1.16" \
  "tqdm>=4.60,<5" "pybind11>=2.12,<4" "ninja>=1.11,<2" "setuptools>=64,<90" "wheel<1" \
  "pytest>=7,<10" "pytest-xdist>=3.2,<4" "pytest-timeout>=2,<3" "hypothesis>=6,<7" "expecttest>=0.2,<1" \
  "transformers==5.25.0"
t_install=$((SECONDS - t0))

rm -rf "$SRC" && mkdir -p "$SRC"
(cd "$ROOT" && git ls-files -z | xargs -0 tar -cf - --) | tar -xf - -C "$SRC"
MAX_JOBS=$JOBS "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps "$SRC"
t_build=$((SECONDS - t0 - t_install))

# The IOPDDL instances test_solver reads sit beside the source tree (as solver.py looks for
# them), not beside the installed copy.
if [ -z "${TLM_SHARED_DIR:-}" ]; then
  d="$ROOT"
  for _ in 1 2 3; do
    d=$(dirname "$d")
    if [ -d "$d/shared/iopddl" ]; then export TLM_SHARED_DIR="$d/shared"; break; fi
  done
fi
# Run from outside the source tree, so `import torch_localmap` is the installed copy.
cd "$DIR"
"$VENV/bin/python" -m torch_localmap versions
T="$ROOT/test/python"
# The zoo's hf_llama stands for parallelize against one process and the backend on 4 ranks
# (test_parallelize's parity tests repeat it on smaller models: only its entry-point test is
# here); the 70B recompute plan is the planner's search, which the main suite covers.
# test_op_parity's rules read their ops' arguments by the schema names of the torch
# op_schemas.inc was generated from: it checks them against each end's kernels.
# The compiled FSDP2 case hands Inductor a partitioned backward (its remat pass differs by release).
# --deselect matches node IDs, which are relative to the rootdir, not the paths given above.
"$VENV/bin/pytest" -q -p no:cacheprovider -n "$JOBS" --dist worksteal --rootdir "$ROOT" -c "$ROOT/pyproject.toml" \
  "$T/test_solver.py" "$T/test_torch_compat.py" "$T/test_localmap_ops.py" \
  "$T/test_parallelize.py::test_backend_is_registered_by_entry_point" \
  "$T/test_plan_reuse.py" "$T/test_ops_on_import.py" "$T/test_live_calibration.py" "$T/test_local_tensors.py" \
  "$T/test_direct_calls.py" "$T/test_deferred_loss.py" "$T/test_op_parity.py" \
  "$T/test_torch_plans.py::test_fsdp2_plan_compiled_with_uneven_shards_trains_like_one_process" \
  "$T/test_recompute.py" --deselect test/python/test_recompute.py::test_llama_70b_plans_on_the_meta_device_and_fits_by_recomputing \
  "$T/test_zoo.py::test_zoo_model_trains_like_one_process[hf_llama]"
echo "test-compat torch $TORCH: passed (install ${t_install} s, build ${t_build} s, total $((SECONDS - t0)) s)"
