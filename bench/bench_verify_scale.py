"""Loop-dependent checks at scale (issue 10 item 5, D-VERIFY-ENUM, D-VERIFY-BUDGET).

    python bench/bench_verify_scale.py

Prints, in CPU seconds of this process (the machine is shared):
* the static checks (`verify_program`, the `nem-verify-static` stage) of a
  10^6-iteration loop body of 4 tasks (target < 2 s), and of a
  10^5-iteration one with the ratio to the point-by-point enumeration they
  replaced (the same per-point checks, no interval proofs, no numpy);
* `nem-run`'s cost per task on 100k single-transfer iterations, parse, load
  and verification included (target <= 20 us per task), split into load
  and run;
* the whole `nem-verify` pipeline (parse included) on the 10^6-iteration
  body (target < 2 s), and the hazard analysis of the 10^5-iteration one
  with the ratio to replaying every iteration (the analysis before
  D-HAZ-SYMBOLIC, kept as the tests' oracle);
* the hazard analysis of a 4-level nest, two levels `@max_in_flight(2)`
  with `mod` slots, 10^6 task instances from 4 static tasks (and a racy
  variant: one slot too few), against the replay.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "unit"))

from hazard_replay import HazardFinder as Replay
from semantics_programs import static_verdict
from test_hazard_oracle import pipelined as four_tasks
from test_iteration_space import PointByPoint

from nem.analysis.hazard_finder import HazardFinder
from nem.dialect.ops import ProgramOp
from nem.dialect.verifier import ProgramVerifier
from nem.frontends.nem_text.parser import parse_nem
from nem.runtime import NemInterpreter


def single_transfer(n: int) -> str:
    return f"""program p:
buffer A : L2 (size={8 * n})
buffer B : L2 (size={8 * n})
loop i in [0..{n - 1}]:
  t = transfer.sync(dst=region(A, i * 8, 8), src=region(B, i * 8, 8))
endloop
"""


def nested(slots: int = 2) -> str:
    """4 loops (10 x 10 x 10 x 250), levels a and c pipelined, ping-pong
    slots `((a mod 2) * 2 + c mod 2)`; 4 tasks per innermost iteration: 10^6
    task instances.  `slots=1` drops the `a` slot: iterations a, a+1 race."""
    slot = "((a mod 2) * 2 + c mod 2) * 64" if slots == 2 else "(c mod 2) * 64"
    tile = "(((a * 10 + b) * 10 + c) * 250 + d) * 16"
    return f"""program p:
buffer A : L2 (size=16000000)
buffer B : L2 (size=16000000)
buffer L : L1[0] (size=256)
loop a in [0..9] @max_in_flight(2):
  loop b in [0..9]:
    loop c in [0..9] @max_in_flight(2):
      loop d in [0..249]:
        ta = transfer.async(dst=region(L, {slot}, 16), src=region(A, {tile}, 16))
        tb = transfer.async(dst=region(L, {slot} + 16, 16), src=region(B, {tile}, 16))
        tc = transfer.sync(dst=region(A, {tile}, 16), src=region(L, {slot} + 16, 16), deps=[ta, tb])
        td = transfer.sync(dst=region(B, {tile}, 16), src=region(L, {slot}, 16), deps=[tc])
      endloop
    endloop
  endloop
endloop
"""


def cpu(fn) -> tuple[float, object]:
    t0 = time.process_time()
    r = fn()
    return time.process_time() - t0, r


def verify_time(cls, src: str) -> float:
    prog = next(o for o in parse_nem(src, "bench.nem").walk() if isinstance(o, ProgramOp))
    dt, diags = cpu(lambda: cls(prog).run())
    assert not [d for d in diags if d.severity == "error"], diags
    return dt


def main() -> None:
    verify_time(ProgramVerifier, four_tasks(4))  # warm up: catalogs, imports
    t6 = verify_time(ProgramVerifier, four_tasks(10**6))
    print(f"static checks, 10^6 iterations x 4 tasks: {t6:.3f} s (target < 2 s)")
    t5 = verify_time(ProgramVerifier, four_tasks(10**5))
    o5 = verify_time(PointByPoint, four_tasks(10**5))
    print(
        f"static checks, 10^5 iterations x 4 tasks: {t5:.3f} s; point by point {o5:.3f} s "
        f"(ratio {o5 / max(t5, 1e-6):.0f}x)"
    )

    n = 100_000
    src = single_transfer(n)
    it = NemInterpreter(trace=False)  # as nem-run: races on, no trace
    t_load, _ = cpu(lambda: it.load_string(src, "bench.nem"))
    t_run, res = cpu(lambda: it.run())
    assert res.tasks_run == n and not res.races
    total = t_load + t_run
    print(
        f"nem-run, {n} single-transfer iterations: load+verify {t_load:.3f} s, "
        f"run {t_run:.3f} s, {total / n * 1e6:.1f} us per task (target <= 20 us)"
    )

    t_full, errs = cpu(lambda: static_verdict(four_tasks(10**6)))
    assert not errs, errs
    print(
        f"nem-verify pipeline (parse and hazards included), 10^6 iterations x 4 tasks: "
        f"{t_full:.2f} s (target < 2 s)"
    )
    prog = next(
        o for o in parse_nem(four_tasks(10**5), "bench.nem").walk() if isinstance(o, ProgramOp)
    )
    t_new, d_new = cpu(lambda: HazardFinder(prog).run())
    t_old, d_old = cpu(lambda: Replay(prog).run())
    assert d_new == d_old == [], (d_new, d_old)
    print(
        f"hazard analysis, 10^5 iterations x 4 tasks: {t_new:.3f} s; replaying every "
        f"iteration {t_old:.2f} s (ratio {t_old / max(t_new, 1e-6):.0f}x)"
    )

    for slots in (2, 1):
        prog = next(
            o for o in parse_nem(nested(slots), "bench.nem").walk() if isinstance(o, ProgramOp)
        )
        t_new, d_new = cpu(lambda: HazardFinder(prog).run())
        t_old, d_old = cpu(lambda: Replay(prog).run())
        assert [d.message for d in d_new] == [d.message for d in d_old], (d_new, d_old)
        what = "race-free" if slots == 2 else f"racy, {len(d_new)} errors as the replay's"
        print(
            f"hazard analysis, 4-level nest, 10^6 task instances ({what}): {t_new:.3f} s; "
            f"replaying every iteration {t_old:.2f} s (ratio {t_old / max(t_new, 1e-6):.0f}x)"
        )


if __name__ == "__main__":
    main()
