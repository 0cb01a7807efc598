# Concerto's entry points. Each target installs what it needs first.
#   make demo   - build, then run Concerto's demo
#   make test   - build once, then run every test (Rust, Python, quick reproduction);
#                 ends with the ten slowest tests and the total time
#   make check-full - what only a quiet machine or a long run can check: the
#                 tests marked quiet_machine (real bytes against the model,
#                 both sides of a tolerance) with the host's load recorded,
#                 and the full reproductions (docs/contributing.md)
#   make fuzz   - ten million fuzzed frames against a live server (a bounded
#                 count runs in make test; see docs/security.md)
#   make lint   - rustfmt, clippy (warnings denied) and ruff, as CI checks them
#   make bench  - criterion benchmarks, the SimGrid side of the engine and
#                 fluid-mode comparisons, and the real file system beside the
#                 local one, GlusterFS and MooseFS, and collective MPI-IO on
#                 HDD-class servers beside the simulator, and what integrity
#                 on the wire costs between namespaces (docs/performance.md,
#                 docs/security.md)

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.deps-installed
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(HOME)/.cargo/bin:$(PATH)

.PHONY: demo test check-full bench fuzz build lint toolchain clean

toolchain:
	@bash .ci/toolchain

$(PY):
	python3 -m venv $(VENV)

$(STAMP): requirements.txt | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

# The one build of the Rust code per run: the server and FUSE binaries
# (installed beside the environment's Python, where `concerto` finds them)
# and the release extension module (which links only the client library).
# The MPI-IO library is linked once per MPI library installed (Open MPI's
# and MPICH's mpi.h differ) and installed in the environment's lib/concerto.
build: toolchain $(STAMP)
	cargo build --release -p concerto-server -p concerto-fuse -p concerto-mpiio
	install -m 755 target/release/concerto-server target/release/concerto-fuse $(VENV)/bin/
	bash crates/concerto-mpiio/build-shims.sh target/release target/release
	install -D -m 755 -t $(VENV)/lib/concerto target/release/libconcerto-mpiio-*.so
	$(VENV)/bin/maturin develop --release --quiet

# rustfmt, clippy with warnings denied, ruff (.ci/lint); CI runs it.
lint: toolchain $(STAMP)
	RUFF=$(VENV)/bin/ruff bash .ci/lint

demo: build
	$(VENV)/bin/concerto demo

# Two pytest workers (the machine has two cores and most tests wait on
# throttled servers), each taking whole files, so a module's cluster or
# reproduction is made once; the tests that assert what a quiet machine
# delivers run in check-full. The cargo test build shares the release
# build's crates (crates/concerto-workspace-hack).
PYTEST_WORKERS ?= 2
test: build
	@start=$$(date +%s); \
	cargo test --workspace --release --exclude concerto-python --exclude concerto-bench && \
	$(VENV)/bin/pytest -q tests -n $(PYTEST_WORKERS) --dist loadfile -m "not quiet_machine" --durations=10 \
	  --durations-min=1 && \
	echo "make test: $$(( $$(date +%s) - start )) s after the build (cargo test and pytest)"

check-full: build
	$(VENV)/bin/pytest -q tests -m quiet_machine --durations=10
	$(VENV)/bin/concerto reproduce coordination --out results/full/coordination
	$(VENV)/bin/concerto reproduce iosets --out results/full/iosets

bench: build
	cargo bench -p concerto-bench
	cargo run --release -p concerto-server --example profile_accuracy
	bash benches/simgrid/run.sh
	bash benches/peers/fsbench.sh
	$(VENV)/bin/concerto bench mpiio
	$(VENV)/bin/concerto bench integrity --link-rate 100MB/s
	$(VENV)/bin/python benches/calibration/stability.py

# The protocol fuzzed against a live server: CONCERTO_FUZZ_FRAMES frames
# (default ten million), seed CONCERTO_FUZZ_SEED (default 1).
fuzz: build
	CONCERTO_FUZZ_FRAMES=$${CONCERTO_FUZZ_FRAMES:-10000000} cargo test --release -p concerto-server --test integration -- fuzz:: --nocapture

clean:
	rm -rf target $(VENV) results
