#!/usr/bin/env bash
# Idempotent set-up: .venv, torch (CPU wheel), compgen (+ dev tools), KenLM's lmplz.
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

# torch first: a pinned CPU wheel; a looser range would pull a multi-GB CUDA build.
if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  echo "== installing torch $TORCH_VERSION"
  pip_install "torch==$TORCH_VERSION"
fi

extra=""
[ "$mode" = test ] && extra="[dev,ray]"
stamp=".venv/.compgen-installed-$mode-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ] || ! .venv/bin/python -c "import compgen" 2>/dev/null; then
  echo "== installing compgen$extra (kenlm's query module compiles once, ~90 s)"
  pip_install -e ".$extra"
  touch "$stamp"
fi

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
