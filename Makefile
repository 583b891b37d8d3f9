# The two entry points of a fresh machine. Both are idempotent.
.PHONY: demo test lint

demo:
	bash scripts/setup.sh demo
	bash scripts/demo.sh

test:
	bash scripts/setup.sh test
	.venv/bin/ruff check compgen tests scripts
	.venv/bin/python -m pytest -q --durations=15

lint:
	.venv/bin/ruff check compgen tests scripts
