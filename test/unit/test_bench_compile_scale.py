"""bench/bench_compile_scale.py says why a compile printed no result
(issue 30 item 3): a compile ended by the out-of-memory killer leaves an
empty stderr, and the bench printed `failed: []`."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_compile_scale.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_compile_scale", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_killed_child_names_the_signal():
    out = _run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert out.returncode == -signal.SIGKILL and out.stderr == ""
    assert _bench().failure(out) == "killed by SIGKILL (out of memory?)"


def test_other_signal_and_stderr():
    out = _run(
        "import os, signal, sys; print('boom', file=sys.stderr, flush=True); "
        "os.kill(os.getpid(), signal.SIGTERM)"
    )
    assert _bench().failure(out) == "killed by SIGTERM; last stderr line: boom"


def test_exit_status_without_stderr():
    bench = _bench()
    assert bench.failure(_run("raise SystemExit(3)")) == "exit status 3, no stderr"
    assert bench.failure(_run("import sys; sys.exit('no model')")) == "no model"
