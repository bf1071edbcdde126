# Two entry points (see README): `make demo` and `make test`. Both install what
# they need first, into a project virtual environment ($(VENV), created on first
# use from the machine's python3), so they work on a fresh machine of this kind
# and never depend on what else the machine's Python has installed.
VENV ?= .venv
PY ?= $(VENV)/bin/python
PIP = $(PY) -m pip
JOBS ?= 2
# CLEAN=1: test-compat removes its venv when done (CI; see tools/test_compat.sh).
CLEAN ?= 0

# Runtime and build requirements (pyproject.toml says the same for `pip install .`).
# highspy: HiGHS is loaded through the C API the wheel exports; 1.16 exports none,
# so the range is bounded (docs/architecture.md, "HiGHS").
REQUIREMENTS = "torch==2.13.*" "numpy>=1.24,<3" "highspy>=1.7,<1.16" "tqdm>=4.60,<5" "pybind11>=2.12,<4" \
    "ninja>=1.11,<2" "setuptools>=64,<90" "wheel<1"
TEST_REQUIREMENTS = "pytest>=7,<10" "pytest-xdist>=3.2,<4" "pytest-timeout>=2,<3" "hypothesis>=6,<7" "rich>=13,<16" \
    "transformers==5.25.0" "pillow>=9,<13" "expecttest>=0.2,<1"
# The model zoo's vision models. timm requires torchvision, whose PyPI wheels are CUDA builds:
# installed without dependencies (no second torch) and made importable next to the CPU torch
# by tools/torchvision_cpu_shim.py (installed as a .pth start-up hook of the venv).
ZOO_NO_DEPS = "timm==1.0.31" "torchvision==0.28.0"

.PHONY: install venv versions demo test test-cpp test-py test-fuzz gtest-dev chromium verify-strategies gpu-check test-compat \
    test-compat-ends

$(PY):
	python3 -m venv $(VENV)

venv: $(PY)

install: $(PY)
	$(PIP) install --quiet $(REQUIREMENTS) $(TEST_REQUIREMENTS)
	$(PIP) install --quiet --no-deps $(ZOO_NO_DEPS)
	@SITE=$$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") && \
	    cp tools/torchvision_cpu_shim.py $$SITE/ && echo "import torchvision_cpu_shim" > $$SITE/torchvision_cpu_shim.pth
	$(PIP) install --quiet --no-build-isolation -e .

# What a run actually used: the torch, highspy and HiGHS library versions.
versions:
	@$(PY) -m torch_localmap versions

demo: install
	$(PY) -m torch_localmap demo

# Every suite runs even when an earlier one fails; the summary names the failures
# and the exit status is non-zero if any failed (test/run_all.sh).
test: install gtest-dev chromium versions
	PY=$(PY) JOBS=$(JOBS) FUZZ_SECONDS=$(FUZZ_SECONDS) bash test/run_all.sh

# The smoke subset against another torch of the supported range (pyproject.toml), in a venv
# of its own: `make test-compat TORCH=2.11.0` (tools/test_compat.sh).
test-compat:
	TORCH=$(TORCH) JOBS=$(JOBS) PYTHON=python3 CLEAN=$(CLEAN) bash tools/test_compat.sh

# The oldest and the newest torch release of the supported range (CI runs both after
# `make test`; test_torch_compat.py checks these stay the ends of pyproject's range).
COMPAT_ENDS = 2.11.0 2.15.0
test-compat-ends:
	@status=0; for t in $(COMPAT_ENDS); do $(MAKE) --no-print-directory test-compat TORCH=$$t || status=1; done; \
	    exit $$status

# On a machine with a GPU and its own torch (no venv, no network): build against that torch,
# run the CUDA / NCCL checks, calibrate, benchmark; one report (tools/gpu_check.sh).
gpu-check:
	PYTHON=$${PYTHON:-python3} bash tools/gpu_check.sh

# GoogleTest comes from Debian (libgtest-dev); installed on first use.
gtest-dev:
	@test -f /usr/include/gtest/gtest.h || { apt-get update -qq && apt-get install -y -qq libgtest-dev cmake; }

# Headless Chromium renders the HTML plan report in a test (test_report_html.py); from Debian.
chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

test-cpp: gtest-dev
	cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release -DTLM_PYTHON=$(abspath $(PY)) > /dev/null
	cmake --build build/cmake -j $(JOBS)
	ctest --test-dir build/cmake --output-on-failure -j $(JOBS)

# Reader fuzzers under AddressSanitizer (test/cpp/cmake/solver_fuzz.cmake), FUZZ_SECONDS of inputs.
FUZZ_SECONDS ?= 90
test-fuzz: gtest-dev
	cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release -DTLM_PYTHON=$(abspath $(PY)) > /dev/null
	cmake --build build/cmake -j $(JOBS) --target solver_fuzz
	build/cmake/solver_fuzz $(FUZZ_SECONDS)

test-py:
	$(PY) -m pytest -n $(JOBS) --dist worksteal -q test/python

# Every C++ sharding strategy checked numerically on the default meshes (issue 3).
verify-strategies:
	$(PY) -m torch_localmap verify-strategies
