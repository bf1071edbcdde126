#!/usr/bin/env bash
# Runs every test suite of `make test`, each even when an earlier one failed, then
# prints one line per suite (status, seconds) and exits non-zero if any failed.
#   PY=.venv/bin/python JOBS=2 FUZZ_SECONDS=90 bash test/run_all.sh
set -u
cd "$(dirname "$0")/.."
PY=${PY:-python3}
JOBS=${JOBS:-2}
FUZZ_SECONDS=${FUZZ_SECONDS:-90}
CMAKE_ARGS=(-S . -B build/cmake -DCMAKE_BUILD_TYPE=Release "-DTLM_PYTHON=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")")

names=()
results=()
run_suite() {  # name, command...
  local name=$1
  shift
  echo "=== $name: $*"
  local t0=$SECONDS
  "$@"
  local rc=$?
  names+=("$name")
  results+=("$rc $((SECONDS - t0))")
  [ "$rc" -eq 0 ] || echo "=== $name FAILED (exit $rc)"
}

build_cpp() {
  cmake "${CMAKE_ARGS[@]}" >/dev/null && cmake --build build/cmake -j "$JOBS" --target core_tests solver_fuzz json_fuzz
}
run_suite "C++ build" build_cpp
run_suite "ctest (GoogleTest)" ctest --test-dir build/cmake --output-on-failure -j "$JOBS"
run_suite "reader fuzzers (ASan+UBSan)" bash -c \
  "build/cmake/solver_fuzz $((FUZZ_SECONDS * 2 / 3)) && build/cmake/json_fuzz $((FUZZ_SECONDS / 3))"
run_suite "verify-strategies" "$PY" -m torch_localmap verify-strategies
# --durations: the slowest tests in the log, so a suite that grows shows where.
run_suite "pytest" "$PY" -m pytest -n "$JOBS" --dist worksteal -q --durations=15 test/python

echo
echo "=== summary"
failed=0
for i in "${!names[@]}"; do
  read -r rc secs <<<"${results[$i]}"
  status=passed
  if [ "$rc" -ne 0 ]; then status="FAILED (exit $rc)"; failed=$((failed + 1)); fi
  printf '  %-32s %-18s %5ss\n' "${names[$i]}" "$status" "$secs"
done
if [ "$failed" -ne 0 ]; then
  echo "$failed of ${#names[@]} suites failed"
  exit 1
fi
echo "all ${#names[@]} suites passed"
