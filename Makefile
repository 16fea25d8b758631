# hyper_parallel — the two commands a new user types are `make demo` and `make test`;
# both create .venv and install everything on first use.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# torch 2.13.0 (CPU) is served from local disk; the constraints file keeps pip from pulling a
# multi-GB CUDA build for a range in pyproject.toml.
WHEELS_DIR ?= /opt/wheels
PIP_INSTALL := $(PY) -m pip install -q -c constraints.txt $(if $(wildcard $(WHEELS_DIR)),--find-links $(WHEELS_DIR))
PYTEST := $(PY) -m pytest -q
# Each test process uses one intra-op thread: the CI machine has 2 cores and torchrun tests run
# several processes at once.
export OMP_NUM_THREADS ?= 1
export HYPER_PARALLEL_DISABLE_TQDM ?= 1
# The suite starts hundreds of interpreters and forked ranks, each importing the package: with
# PYTHONDONTWRITEBYTECODE (set in some containers) each one compiles every module it imports
# from source, and pytest rewrites every test module's asserts again in each worker.
unexport PYTHONDONTWRITEBYTECODE
TEST_WORKERS ?= $(shell env -u OMP_NUM_THREADS nproc 2>/dev/null || echo 2)

.PHONY: install test test-fast test-slow test-slurm test-mindspore demo lint codegen codegen-check bench bench-cli clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -e '.[dev]'
	touch $(STAMP)

# pytest exits 5 when it collects nothing; that must fail loudly, never pass.
define run_pytest
	$(PYTEST) $(1); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests ($(1))" >&2; exit 1; fi; \
	exit $$rc
endef

# Both suites in one pytest session over every core: the in-process tests fill the time the
# torchrun jobs spend starting up and waiting, and no suite ends with one worker idle behind the
# other's last test. One test handed out at a time (--maxschedchunk 1), in the order of
# tests/conftest.py: the tests that start a shared job first, longest first, those that only
# read one last. --durations: every run's log names the tests that set the suite's length.
# The MindSpore check runs beside the pytest session, its output held until the session ends:
# it is 40 s of wall time (its install and MindSpore's import) and a few CPU seconds.
test: install
	$(MAKE) --no-print-directory codegen-check
	@ms_log=$$(mktemp); \
	( $(MAKE) --no-print-directory test-mindspore > $$ms_log 2>&1; echo $$? >> $$ms_log.rc ) & \
	( $(call run_pytest,-n $(TEST_WORKERS) --maxschedchunk 1 --durations=25 tests) ); rc=$$?; \
	wait; echo "== make test-mindspore (run beside the session)"; cat $$ms_log; \
	ms_rc=$$(cat $$ms_log.rc); rm -f $$ms_log $$ms_log.rc; \
	if [ "$$ms_rc" != 0 ]; then echo "error: make test-mindspore failed ($$ms_rc)" >&2; fi; \
	[ $$rc -eq 0 ] && [ "$$ms_rc" = 0 ]

# One half of `make test` each. The fast half, the inner loop (under 90 s): every test of one
# process and a few core-seconds, no multi-rank job (tests/helpers/torchrun.py refuses one from
# a test not marked slow), and the fuzzers at a tenth of their examples (the same properties;
# `make test` runs the whole hunt). (TEST_WORKERS counts the cores without OMP_NUM_THREADS,
# which GNU nproc honours: the export above made it 1 in every sub-make.)
test-fast: install
	@export HYPER_PARALLEL_FUZZ_SCALE=$${HYPER_PARALLEL_FUZZ_SCALE:-0.1}; \
	$(call run_pytest,-m "not slow" -n $(TEST_WORKERS) --durations=15 tests)

# The slow half: multi-process training runs (torchrun, 2-4 CPU ranks), in the order of
# tests/conftest.py, one test handed out at a time.
test-slow: install
	@$(call run_pytest,-m slow -n $(TEST_WORKERS) --maxschedchunk 1 --durations=15 tests)

# The generated Slurm job on the real Slurm: tests/slurm/ starts a one-node cluster here
# (scripts/slurm_cluster.sh: slurmctld, slurmd and munged from a scratch folder, no systemd),
# stops it at the end, and runs the job through a time-limit stop, requeue and resume and a
# user's cancel. Needs root; installs slurm-wlm and munge with apt where they are missing.
# `make test` skips these tests (they run only with HYPER_PARALLEL_TEST_SLURM=1).
test-slurm: install
	@export HYPER_PARALLEL_TEST_SLURM=1; \
	$(call run_pytest,-p no:cacheprovider -rs --durations=10 tests/slurm)

# The framework-free layers (platform, protocols, config, legacy parser) on MindSpore, in an
# environment of its own that has mindspore and no torch at all (MindSpore is a 2.8 GB install).
MS_VENV := .venv-mindspore
test-mindspore:
	test -x $(MS_VENV)/bin/python || $(PYTHON) -m venv $(MS_VENV)
	test -f $(MS_VENV)/.installed-stamp || { $(MS_VENV)/bin/python -m pip install -q \
		mindspore PyYAML tyro pytest hypothesis && touch $(MS_VENV)/.installed-stamp; }
	$(MS_VENV)/bin/python -m pip install -q --no-deps -e .
	! $(MS_VENV)/bin/python -c "import torch" 2>/dev/null || { echo "error: torch leaked into $(MS_VENV)" >&2; exit 1; }
	HYPER_PARALLEL_PLATFORM=mindspore $(MS_VENV)/bin/python -m pytest -q -p no:cacheprovider -rs \
		tests/crossbackend tests/torch/ut/platform/test_platform.py -k "mindspore or crossbackend or framework_free"

DEMO_OUT := outputs/demo
DEMO_YAML := examples/yaml/train_qwen3_5_demo.yaml
DEMO_NAME := train_qwen3_5_demo
DEMO_REGISTRY := $(DEMO_OUT)/config_registry.py
DEMO_TORCHRUN := $(PY) -m torch.distributed.run --standalone --nproc_per_node 2

# The migration story on the debug model and the shipped corpus, FSDP over 2 CPU ranks:
# 1. convert the whole fleet, every examples/yaml/*.yaml, into one registry module (into
#    $(DEMO_OUT), never over the tracked recipes/), print it and its size against the one-file
#    recipes of the same YAMLs in recipes/; 2. train its demo recipe with HyperTrainer
#    (`--checkpoint.folder` puts its checkpoints and metrics.jsonl under $(DEMO_OUT)/recipe);
#    3. train the demo YAML with the legacy LLMTrainer ($(DEMO_OUT)/legacy); 4. overlay the two
#    loss curves in $(DEMO_OUT)/loss_curves.png, merge the metrics into $(DEMO_OUT)/metrics.jsonl
#    and fail unless the two runs are bit-identical.
demo: install
	rm -rf $(DEMO_OUT)
	mkdir -p $(DEMO_OUT)
	$(PY) -m hyper_parallel.codegen --from-yaml examples/yaml -o $(DEMO_REGISTRY)
	cat $(DEMO_REGISTRY)
	@printf 'fleet module: %s lines for %s YAMLs; their one-file recipes in recipes/: %s lines\n' \
		"$$(wc -l < $(DEMO_REGISTRY))" "$$(ls examples/yaml/*.yaml | wc -l)" \
		"$$(cat $$(ls examples/yaml/*.yaml | sed 's|examples/yaml/\(.*\)\.yaml|recipes/\1.py|') | wc -l)"
	$(DEMO_TORCHRUN) -m hyper_parallel.train --module $(subst /,.,$(DEMO_REGISTRY:.py=)) \
		--config $(DEMO_NAME) --checkpoint.folder=$(DEMO_OUT)/recipe
	$(DEMO_TORCHRUN) scripts/train_lm.py $(DEMO_YAML) \
		--train.checkpoint.output_dir=$(DEMO_OUT)/legacy
	$(PY) scripts/compare_runs.py $(DEMO_OUT)/legacy $(DEMO_OUT)/recipe \
		--png $(DEMO_OUT)/loss_curves.png --jsonl $(DEMO_OUT)/metrics.jsonl

lint: install
	$(PY) -m ruff check hyper_parallel tests scripts bench

# Regenerate the configuration code and docs from codegen/field_table.yaml (a second run
# changes nothing).
codegen: install
	$(PY) -m hyper_parallel.codegen

# Regenerate into a temporary place and compare: silent and exit 0 when the committed files are
# current; otherwise a diff, the reason and the fix per file, exit 1. Part of `make test`.
codegen-check: install
	@$(PY) -m hyper_parallel.codegen --check

bench: install
	$(PY) bench/bench_train.py
	$(PY) bench/bench_cli.py
	$(PY) bench/bench_codegen.py
	$(PY) bench/bench_moe.py
	$(PY) bench/bench_context_parallel.py
	$(PY) bench/bench_pipeline.py
	$(PY) bench/bench_preflight.py
	$(PY) bench/bench_hf_export.py
	$(PY) bench/bench_packing.py

# ConfigManager.parse_args against torchtitan 0.3.0; builds bench/.titan-env on first use.
bench-cli: install
	$(PY) bench/bench_cli.py

clean:
	rm -rf $(VENV) .venv-mindspore .pytest_cache build *.egg-info $(DEMO_OUT)
