# Two entry points (see README): `make demo` and `make test`. Both install what
# they need first, so they work on a fresh machine of this kind.
PY ?= python3
PIP = $(PY) -m pip
JOBS ?= 2

.PHONY: install demo test test-cpp test-py test-fuzz gtest-dev verify-strategies

install:
	$(PIP) install --quiet "torch==2.13.*" "numpy>=1.24" "highspy>=1.7" "pybind11>=2.12" ninja "setuptools>=64" wheel \
	    pytest pytest-xdist pytest-timeout hypothesis rich
	$(PIP) install --quiet --no-build-isolation -e .

demo: install
	$(PY) -m torch_localmap demo

test: install test-cpp verify-strategies test-py

# GoogleTest comes from Debian (libgtest-dev); installed on first use.
gtest-dev:
	@test -f /usr/include/gtest/gtest.h || { apt-get update -qq && apt-get install -y -qq libgtest-dev cmake; }

test-cpp: gtest-dev test-fuzz
	cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release > /dev/null
	cmake --build build/cmake -j $(JOBS)
	ctest --test-dir build/cmake --output-on-failure -j $(JOBS)

# Reader fuzzer under AddressSanitizer (test/cpp/cmake/solver_fuzz.cmake), 90 s of inputs.
FUZZ_SECONDS ?= 90
test-fuzz: gtest-dev
	cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=Release > /dev/null
	cmake --build build/cmake -j $(JOBS) --target solver_fuzz
	build/cmake/solver_fuzz $(FUZZ_SECONDS)

test-py:
	$(PY) -m pytest -n $(JOBS) -q test/python

# Every C++ sharding strategy checked numerically on the default meshes (issue 3).
verify-strategies:
	$(PY) -m torch_localmap verify-strategies
