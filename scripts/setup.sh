#!/usr/bin/env bash
# Idempotent set-up: .venv, torch (the CPU wheel, or the CUDA build where nvidia-smi finds a
# GPU), compgen (+ dev tools; + ONNX Runtime's CUDA provider with a GPU), KenLM's lmplz.
# Usage: scripts/setup.sh [demo|test]
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-demo}
PY=${PYTHON:-python3}
TORCH_VERSION=2.13.0

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv
fi
pip_install() { .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@"; }

gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
  gpu=1
fi

# torch first, pinned. Without a GPU: the CPU wheel (a looser pin would pull a multi-GB CUDA
# build). With one: the CUDA build of the default index (local CPU wheels left out).
if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION' or ($gpu and torch.version.cuda is None))" 2>/dev/null; then
  if [ "$gpu" = 1 ]; then
    echo "== installing torch $TORCH_VERSION (CUDA build: nvidia-smi finds a GPU)"
    PIP_FIND_LINKS= pip_install --force-reinstall --no-deps "torch==$TORCH_VERSION"
    pip_install "torch==$TORCH_VERSION"
  else
    echo "== installing torch $TORCH_VERSION (CPU wheel: nvidia-smi finds no GPU)"
    pip_install "torch==$TORCH_VERSION"
  fi
fi

extras=()
[ "$mode" = test ] && extras+=(dev ray)
if [ "$gpu" = 1 ]; then
  extras+=(gpu)
  # onnxruntime-gpu replaces onnxruntime (the same module): never both
  .venv/bin/python -m pip uninstall --quiet --yes onnxruntime >/dev/null 2>&1 || true
fi
extra=""
[ ${#extras[@]} -gt 0 ] && extra="[$(IFS=,; echo "${extras[*]}")]"
stamp=".venv/.compgen-installed-$mode-gpu$gpu-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ] || ! .venv/bin/python -c "import compgen" 2>/dev/null; then
  echo "== installing compgen$extra (kenlm's query module compiles once, ~90 s)"
  pip_install -e ".$extra"
  touch "$stamp"
fi
.venv/bin/python -c "import torch; print('== torch', torch.__version__, 'CUDA', torch.version.cuda, '(GPUs seen:', torch.cuda.device_count(), end=')\\n')"

# `compgen` in an activated venv: the program wins over bash's builtin of the same name for
# its own commands, and completes them (bash and zsh); see scripts/shell/compgen.sh.
hook='if [ -n "${BASH_VERSION:-}${ZSH_VERSION:-}" ]; then . "'"$PWD"'/scripts/shell/compgen.sh"; fi  # compgen shell set-up'
if ! grep -qF "# compgen shell set-up" .venv/bin/activate; then
  echo "== adding the compgen shell function and completion to .venv/bin/activate"
  printf '\n%s\n' "$hook" >> .venv/bin/activate
fi

# the generator's compiled training loops, built once per machine into ~/.cache/compgen/native
.venv/bin/python -c "from compgen.models import native; native.loops()"

# lmplz and build_binary, built once from the kenlm sources and cached outside the clone.
bash scripts/install_kenlm.sh
