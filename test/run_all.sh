#!/usr/bin/env bash
# Run every test of the NEM toolchain: pytest (test/unit), then lit (test/lit).
#
#   bash test/run_all.sh            (the README's and CI's test command;
#                                    equivalent to: python -m pytest -q -n auto && lit -v test/lit)
#
# pytest runs its tests on every core (pytest-xdist, a test extra: `-n auto`;
# NEM_TEST_WORKERS=N sets the count, 0 runs them in this process): serial,
# the suite took 36 minutes of CPU time, most of CI's time on 2 cores.
# Both runners always run; the script exits non-zero if either fails, and if
# the two together ran no test at all.  It ends with one plain line summing
# both runners: "N passed, N failed" (", N skipped" when some were skipped or
# unsupported).  Extra arguments are passed to pytest.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python}"
LIT="${LIT:-lit}"
log_dir="$(mktemp -d)"
trap 'rm -rf "$log_dir"' EXIT

echo "== pytest (test/unit)"
"$PYTHON" -m pytest -q -n "${NEM_TEST_WORKERS:-auto}" "$@" 2>&1 | tee "$log_dir/pytest.log"
pytest_rc=${PIPESTATUS[0]}

echo "== lit (test/lit)"
"$LIT" -v test/lit 2>&1 | tee "$log_dir/lit.log"
lit_rc=${PIPESTATUS[0]}

# Sum the closing summaries of both runners.
read -r passed failed skipped < <("$PYTHON" - "$log_dir/pytest.log" "$log_dir/lit.log" <<'EOF'
import re
import sys

passed = failed = skipped = 0

# pytest: last "=== 3 failed, 10 passed, 1 skipped in 1.2s ===" / "10 passed in 0.3s"
summary = ""
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if re.search(r"\b(passed|failed|errors?|skipped|xfailed|xpassed|no tests ran)\b.* in [0-9.]+s", line):
        summary = line
for count, what in re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)", summary):
    n = int(count)
    if what in ("passed", "xpassed"):
        passed += n
    elif what in ("failed", "error", "errors"):
        failed += n
    elif what in ("skipped", "xfailed"):
        skipped += n

# lit: "  Passed: 3 (75.00%)", "  Failed: 1 (25.00%)", "  Unsupported: 2 (...)"
lit_kinds = {
    "Passed": "p", "Expectedly Failed": "p",
    "Failed": "f", "Unresolved": "f", "Timed Out": "f", "Unexpectedly Passed": "f",
    "Unsupported": "s", "Skipped": "s",
}
for line in open(sys.argv[2], encoding="utf-8", errors="replace"):
    m = re.match(r"\s+(Passed|Expectedly Failed|Failed|Unresolved|Timed Out|"
                 r"Unexpectedly Passed|Unsupported|Skipped)\s*:\s*(\d+)", line)
    if m:
        kind, n = lit_kinds[m.group(1)], int(m.group(2))
        if kind == "p":
            passed += n
        elif kind == "f":
            failed += n
        else:
            skipped += n
print(passed, failed, skipped)
EOF
) || true
passed="${passed:-0}"; failed="${failed:-0}"; skipped="${skipped:-0}"

status=0
# pytest exit 5 = "no tests collected": fine as long as lit ran tests (checked below).
if [ "$pytest_rc" -ne 0 ] && [ "$pytest_rc" -ne 5 ]; then
    echo "pytest failed (exit $pytest_rc)" >&2
    status=1
fi
if [ "$lit_rc" -ne 0 ]; then
    echo "lit failed (exit $lit_rc)" >&2
    status=1
fi
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1  # a runner failed without a countable test failure (crash, collection error, ...)
fi
if [ $((passed + failed)) -eq 0 ]; then
    echo "no test ran" >&2
    status=1
fi

if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
exit "$status"
