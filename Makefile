# Quick start: `make run` (main job) and `make test` (fast test tier). Both set up .venv themselves.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: setup setup-gpu run test test-slow bench lint clean

$(BIN)/edge: pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# CPU build of torch first, so that no multi-GB CUDA build is pulled in: PyTorch's CPU index
	# (PyPI's Linux torch is the CUDA build); where that index is unreachable, pip's configured sources.
	$(BIN)/pip install -q "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu --timeout 15 --retries 1 \
		|| $(BIN)/pip install -q "torch==2.13.0"
	# the tested stack (constraints.txt): physics and inference versions change measured success rates
	$(BIN)/pip install -q -c constraints.txt -e ".[test]"
	touch $(BIN)/edge

setup: $(BIN)/edge

# NVIDIA GPU: replace the CPU onnxruntime with onnxruntime-gpu (same version); docs/install.md
setup-gpu: setup
	scripts/install_gpu.sh $(BIN)/pip

run: setup
	$(BIN)/edge run

test: setup
	$(BIN)/python -m pytest -q

test-slow: setup
	$(BIN)/python -m pytest -q -m "slow or bench"

bench: setup
	$(BIN)/python benchmarks/sim_speed.py

lint: setup
	$(BIN)/pip install -q -e ".[dev]" && $(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
