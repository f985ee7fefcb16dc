#!/usr/bin/env bash
# Static checks of the NEM toolchain, run by CI (.ci/run) before the tests:
#
#   ruff check .      style: pyflakes, syntax, import order ([tool.ruff] in pyproject.toml)
#   ruff format --check .
#                     layout: every file as `ruff format .` writes it (issue 36)
#   mypy              types: strict on every nem.* package (nem.compile too,
#                     session 23); only flatc's generated module relaxed
#                     ([tool.mypy])
#   lint-imports      package boundaries ([tool.importlinter] contracts)
#
#   bash scripts/check.sh
#
# All four always run; the script exits non-zero if any reports an error, so
# a new error fails CI.  MYPY_CACHE_DIR (default .mypy_cache) keeps mypy
# incremental; CI points it into its temporary directory.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python}"
status=0

echo "== ruff check ."
"$PYTHON" -m ruff check . || status=1

echo "== ruff format --check ."
"$PYTHON" -m ruff format --check . || status=1

echo "== mypy"
"$PYTHON" -m mypy --cache-dir "${MYPY_CACHE_DIR:-.mypy_cache}" || status=1

echo "== lint-imports"
lint-imports --no-cache || status=1

if [ "$status" -ne 0 ]; then
    echo "static checks failed" >&2
else
    echo "static checks passed"
fi
exit "$status"
