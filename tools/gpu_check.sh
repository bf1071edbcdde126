#!/usr/bin/env bash
# One command on a machine with a GPU (`make gpu-check`): builds the extension against the
# machine's own torch, runs the CUDA / NCCL checks, calibrates the cost model on the GPU and
# writes one report. Needs no network: runtime dependencies the machine lacks are carried
# as wheels in $WHEELS (docs/user_guide.md, "On a GPU machine").
#
#   REPORT_DIR   where the report and the logs go (default build/gpu_check)
#   WHEELS       folder of carried wheels, installed with --no-index (default .whl)
#   PYTHON       the interpreter that holds torch (default python3)
#   STEPS        which steps to run (default: all of them, in order)
#   STEP_TIMEOUT seconds one step may run (default 900)
#   STEP_TIME_ARGS the step-time benchmark's arguments (default: llama, the MoE and the MLP,
#                the rows that say most on one GPU, one run a row: the whole check, about
#                430 s on an H200, then fits one 600 s device call; every row of the three
#                models took 660 s there)
#   JOBS         pytest workers for the CUDA tests (default 4: their ranks share the GPUs)
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DIR=${REPORT_DIR:-build/gpu_check}
WHEELS=${WHEELS:-.whl}
STEPS=${STEPS:-"environment build versions plan tests calibrate step_time"}
mkdir -p "$DIR"
REPORT="$DIR/report.md"
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1

if compgen -G "$WHEELS/*.whl" >/dev/null; then
  site=$(mktemp -d /tmp/tlm_site.XXXX)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$WHEELS"/*.whl ||
    { echo "gpu_check: installing the carried wheels in $WHEELS failed" >&2; exit 2; }
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

failed=0
{
  echo "# torch_localmap GPU check"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ) on $(hostname); commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
} >"$REPORT"

# step NAME COMMAND...: runs COMMAND, logs it to $DIR/NAME.log, adds its verdict, time and
# the end of its output to the report.
step() {
  local name=$1; shift
  case " $STEPS " in *" $name "*) ;; *) return 0 ;; esac
  local start=$SECONDS rc
  echo "== $name: $*"
  timeout "${STEP_TIMEOUT:-900}" "$@" >"$DIR/$name.log" 2>&1
  rc=$?
  local verdict="passed"
  [ $rc -ne 0 ] && { verdict="FAILED (exit $rc)"; failed=1; }
  {
    echo "## $name: $verdict in $((SECONDS - start)) s"
    echo
    echo '```'
    echo "\$ $*"
    tail -n 60 "$DIR/$name.log"
    echo '```'
    echo
  } >>"$REPORT"
  echo "   $verdict ($((SECONDS - start)) s)"
  return $rc
}

# A native crash in a step is worth a backtrace: rerun it under a debugger when one exists.
backtrace() {
  local dbg
  dbg=$(command -v gdb || command -v cuda-gdb) || return 0
  "$dbg" -batch -ex run -ex bt -ex "info sharedlibrary" --args "$@" >"$DIR/backtrace.log" 2>&1
  { echo "## native backtrace ($dbg)"; echo; echo '```'; grep -A40 "^#0 " "$DIR/backtrace.log" | head -60
    echo '```'; echo; } >>"$REPORT"
}

PLAN_SMOKE='
import torch, torch_localmap
from torch_localmap.plan import plan_module
m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
p = plan_module(m, (8, 8), (torch.randn(32, 64),), time_limit=5)
print(p.summary.solver)
try:
    torch.ops.localmap.redistribute(torch.randn(3), [4], "R", "S(0)", [2], [0], ["x"])
except (ValueError, RuntimeError) as e:
    print("bad input raised:", type(e).__name__)
'

# The C++ compiler: the system's `c++` (TLM_CXX picks another). On our GPU image CXX names
# another GCC (/opt/gcc/bin/g++) whose build of the extension segfaults at its first
# formatted number (std::ostream::_M_insert<long> in the solver, seen under cuda-gdb), while
# the system GCC's build passes every check; the environment step prints both.
BUILD_CXX=${TLM_CXX:-c++}
LOADED_STDCXX="import re, torch; print('libstdc++ loaded:', sorted({l.split()[-1] for l in open('/proc/self/maps') if re.search(r'libstdc\\+\\+', l)}))"

step environment bash -c "nvidia-smi; echo CXX=\${CXX:-unset}; $BUILD_CXX --version | head -1; echo compiler libstdc++: \$(realpath \$($BUILD_CXX -print-file-name=libstdc++.so.6)); [ -n \"\${CXX:-}\" ] && echo CXX libstdc++: \$(realpath \$(\$CXX -print-file-name=libstdc++.so.6)); $PY -c \"$LOADED_STDCXX\"; $PY -m pip list 2>/dev/null | grep -iE '^(torch|numpy|highspy|transformers|timm|triton) '"
# Installed as a user installs it (editable, this torch, no index): the entry points (the
# `localmap` compile backend) exist only after an install.
step build env CXX="$BUILD_CXX" MAX_JOBS="$(nproc)" "$PY" -m pip install -q --no-build-isolation --no-deps --no-index -e . ||
  { echo "build failed: see $DIR/build.log"; exit 1; }
step versions "$PY" -m torch_localmap versions
step plan "$PY" -c "$PLAN_SMOKE" || backtrace "$PY" -c "$PLAN_SMOKE"
step tests "$PY" -m pytest -q -p no:cacheprovider -o addopts="" --timeout 900 -v -rs -n "${JOBS:-4}" test/python/test_cuda.py \
  test/python/test_localmap_ops.py test/python/test_flex_attention.py test/python/test_device.py -k "cuda or gpu or nccl"
step calibrate "$PY" -m torch_localmap calibrate --device cuda --out "$DIR/cuda_profile.json"
step step_time "$PY" benchmarks/step_time.py --device cuda --json "$DIR/step_time.json" ${STEP_TIME_ARGS:---models llama,moe,mlp --repeats 1 --steps 20 --rows single,ddp,fsdp2,ours,ours_compiled,ours_on_ddp}

echo "report: $REPORT"
exit $failed
