"""One differential case of the graph fuzzer: a model, a compile configuration,
the chain, and what came out.

The chain is the documented one, in-process through the Python API
(docs/compile.md, docs/python-api.md):

    compile   nem.compile.compile_onnx(model, device, route, engines, pipeline,
              verify=False)
    verify    nem.compile.lower.verify_nem: `nem-opt X.nem -p nem-verify`
    run       NemInterpreter: 2 random schedules (`nem-run --schedules 2`)
    compare   with onnxruntime at D-COMPILE-TOL (`nem.compile.check.max_violation`);
              a disagreement is judged against the exact evaluation of
              `graph_exact` (each op in f64, rounded once to its type)

Outcomes (`OUTCOMES`):

  PASS        every output within tolerance
  MISCOMPILE  verified, race-free, the same under every schedule, wrong numbers
              (outside D-COMPILE-TOL of onnxruntime and of the exact evaluation)
  REFERENCE-INEXACT  outside D-COMPILE-TOL of onnxruntime, within it of the
              exact evaluation, which onnxruntime misses by what one-ulp
              rounding errors at each op explain (`graph_exact`): not a bug
  VERIFY-FAIL the program fails nem-verify or the lowering's own final check
              ("lowered NEM program fails nem-verify" / "... fails its checks")
  RACE        a race, a deadlock, or final memory that differs between schedules
  CRASH       an internal error: a traceback, an "internal:" diagnostic, a
              run-time error of a verified program (even "not supported": the
              compiler wrote a program the runtime cannot run), a signal
  TIMEOUT     a step over its CPU-time limit (120 s by default)
  REJECTED    a clean located diagnostic refusing the model ("not supported: ...",
              or a lowering limit such as "cannot be narrowed"), counted per op type

`isolated(...)` runs a case in a forked child under an address-space limit
(`RLIMIT_AS`) and a per-step CPU-time limit, so a crash, a runaway
allocation or a hang is an outcome, not the end of a campaign.
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import resource
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import onnx
from graph_exact import allowance_violation, exact_reference

OUTCOMES = (
    "PASS",
    "MISCOMPILE",
    "VERIFY-FAIL",
    "RACE",
    "CRASH",
    "TIMEOUT",
    "REJECTED",
    "REFERENCE-INEXACT",
)
BUGS = ("MISCOMPILE", "VERIFY-FAIL", "RACE", "CRASH", "TIMEOUT")
DEVICES = ("npm_lite", "npm_mid", "npm_pro", "npm_pro_x1")
ENGINES = {"npm_lite": 1, "npm_mid": 2, "npm_pro": 4, "npm_pro_x1": 4}
"""num_engines of the shipped devices (`nem-opt --print-device`); a test
checks them against the device files."""
ROUTES = ("affine", "transform")
STEP_TIMEOUT = 120.0
MEM_GB = 4.0


@dataclass(frozen=True, order=True)
class Config:
    """One point of the compile matrix."""

    device: str = "npm_pro_x1"
    route: str = "affine"
    engines: int | None = None
    """None: the device's engines (nem-compile's default); 1: `--engines 1`."""
    pipeline: bool = True
    tile_sizes: tuple[int, ...] | None = None
    """None: the L1-derived tiles; else `--tile-sizes` (forces tiling of the
    small tensors the generator makes)."""

    def flags(self, route: bool = False) -> list[str]:
        """The options of this configuration, as the fuzzer's replay takes
        them (its route is affine unless said); `route`: with the route
        always said, as nem-compile takes them (its default is transform)."""
        out = ["--device", self.device]
        if route or self.route != "affine":
            out += ["--route", self.route]
        if self.engines is not None:
            out += ["--engines", str(self.engines)]
        if not self.pipeline:
            out.append("--no-pipeline")
        if self.tile_sizes:
            out += ["--tile-sizes", ",".join(map(str, self.tile_sizes))]
        return out

    @property
    def label(self) -> str:
        return " ".join(self.flags())

    @classmethod
    def parse(cls, d: dict) -> Config:
        sizes = d.get("tile_sizes")
        return cls(
            d["device"], d["route"], d["engines"], d["pipeline"], tuple(sizes) if sizes else None
        )


def matrix(
    devices=DEVICES, routes=ROUTES, engines=("default", "1"), pipelines=(True, False), tiles=(None,)
) -> list[Config]:
    """The distinct configurations (`--engines 1` is the default on a
    one-engine device, and is not repeated); `tiles`: tile-size settings
    (None: the L1-derived ones)."""
    out = []
    for dev in devices:
        for route in routes:
            for e in dict.fromkeys(
                None if x == "default" or ENGINES[dev] == 1 else 1 for x in engines
            ):
                for p in pipelines:
                    out += [Config(dev, route, e, p, t) for t in tiles]
    return out


@dataclass
class CaseResult:
    outcome: str
    step: str = ""
    """compile, verify, run or compare: where the outcome was decided."""
    detail: str = ""
    """The diagnostic's first line, the race, the worst output."""
    op: str = ""
    """For REJECTED: the op type the diagnostic names (or the stage)."""
    times: dict[str, float] = field(default_factory=dict)
    violation: float = 0.0
    """max |nem - ort| / tolerance over the outputs (> 1: out of tolerance)."""
    wrong: str = ""
    """For MISCOMPILE: 'output: N of M elements, max error E'."""

    def signature(self) -> str:
        """What makes two findings the same bug, roughly: outcome, step and
        the diagnostic with its numbers and names blanked."""
        text = re.sub(r"'[^']*'|\"[^\"]*\"|\d+(\.\d+)?(e-?\d+)?", "_", self.detail)
        return f"{self.outcome} {self.step} {text[:160]}"

    @classmethod
    def parse(cls, d: dict) -> CaseResult:
        return cls(**d)


STEP_FILE: Path | None = None
"""In a forked case: the file the current step is written to (`poll` reads
it when the child dies of a signal)."""


class StepTimeout(BaseException):
    """Raised by the per-step CPU-time alarm (a BaseException: the tools'
    `except Exception` handlers must not swallow it)."""


_EXPIRED = [False]
"""Set by the alarm: an exception it raised inside a C++ callback (an MLIR
walk, a pass) may reach `run_case` wrapped in another type."""


def _on_alarm(signum, frame):  # noqa: ARG001
    _EXPIRED[0] = True
    raise StepTimeout


_NODE = re.compile(r"node \d+ '[^']*' \((\w+)\)")


def classify_compile_error(stage: str, message: str) -> CaseResult:
    first = next((ln for ln in message.splitlines() if "error" in ln), message.split("\n")[0])
    m = _NODE.search(message)
    if "internal" in message.lower():
        return CaseResult("CRASH", "compile", f"{stage}: {first}")
    if "lowered NEM program fails" in message:  # its checks, or nem-verify
        return CaseResult("VERIFY-FAIL", "compile", f"{stage}: {first}")
    return CaseResult(
        "REJECTED", "compile", f"{stage}: {first}", op=m.group(1) if m else f"({stage})"
    )


def run_case(
    model: onnx.ModelProto,
    config: Config,
    inputs: dict[str, np.ndarray],
    want: dict[str, np.ndarray],
    timeout: float = STEP_TIMEOUT,
    kernels: dict | None = None,
    schedules: int = 2,
) -> CaseResult:
    """The chain on one case, in this process (`isolated` forks around it);
    the program is loaded as `nem-compile --bisect` loads it (nem.cli.bisect).
    `kernels` replaces reference kernels of the runtime (the tests inject a
    wrong one to check the classification)."""
    from nem.cli.bisect import load_program, read_outputs
    from nem.compile import CompileError, compile_onnx
    from nem.compile.lower import verify_nem

    times: dict[str, float] = {}
    step = "compile"
    old = signal.signal(signal.SIGPROF, _on_alarm)

    def start(name: str) -> float:
        nonlocal step
        step = name
        if STEP_FILE is not None:  # where a child that dies was
            STEP_FILE.write_text(name)
        _EXPIRED[0] = False
        signal.setitimer(signal.ITIMER_PROF, timeout)
        return time.perf_counter()

    def stop(name: str, t0: float) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0)
        times[name] = time.perf_counter() - t0

    try:
        t0 = start("compile")
        try:
            result = compile_onnx(
                model,
                device=config.device,
                route=config.route,
                engines=config.engines,
                pipeline=config.pipeline,
                tile_sizes=config.tile_sizes,
                verify=False,
                stem="model",
            )
        except CompileError as e:
            if _EXPIRED[0]:
                raise StepTimeout from e
            r = classify_compile_error(e.stage, str(e))
            r.times = times
            return r
        finally:
            stop("compile", t0)
        t0 = start("verify")
        try:
            verify_nem(result.nem, "model.nem", config.device)
        except CompileError as e:
            first = str(e).splitlines()[0]
            return CaseResult("VERIFY-FAIL", "verify", first, times=times)
        finally:
            stop("verify", t0)
        t0 = start("run")
        try:
            interp = load_program(result, inputs, config.device, kernels=kernels)
            runs, diff = interp.run_schedules(schedules, 0, jobs=1)
            got = read_outputs(interp, result)
        finally:
            stop("run", t0)
        for r in runs:
            if r.error is not None:  # a verified program the runtime cannot run
                return CaseResult("CRASH", "run", r.error.render().splitlines()[0], times=times)
            if r.races or r.deadlock:
                what = r.races[0] if r.races else r.deadlock
                return CaseResult("RACE", "run", str(what).splitlines()[0], times=times)
        if diff is not None:
            return CaseResult(
                "RACE",
                "run",
                f"final memory differs between schedules: buffer {diff[2]} byte {diff[3]}",
                times=times,
            )
        t0 = start("compare")  # the exact evaluation of a disagreement is timed too
        try:
            return compare(got, want, times, lambda: exact_reference(model, inputs))
        finally:
            stop("compare", t0)
    except StepTimeout:
        return CaseResult("TIMEOUT", step, f"{step} over {timeout:g} CPU seconds", times=times)
    except MemoryError:
        return CaseResult("CRASH", step, f"{step}: MemoryError (address-space limit)", times=times)
    except Exception as e:  # any other exception of the tools is a bug: CRASH
        if _EXPIRED[0]:
            return CaseResult("TIMEOUT", step, f"{step} over {timeout:g} CPU seconds", times=times)
        tb = traceback.extract_tb(e.__traceback__)[-1]
        first = (str(e).strip().splitlines() or [""])[0]
        return CaseResult(
            "CRASH",
            step,
            f"{step}: {type(e).__name__}: {first} [{Path(tb.filename).name}:{tb.lineno} {tb.name}]",
            times=times,
        )
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def _worst(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> tuple[float, str]:
    """The largest violation of D-COMPILE-TOL over the outputs, and the
    output it is on: 'NAME: N of M elements wrong, max error E'."""
    from nem.compile.bisect import count_wrong
    from nem.compile.check import max_violation

    worst = (0.0, "")
    for name, ref in want.items():
        if got[name].size != ref.size:  # a shape disagreement, not a harness crash
            return (
                float("inf"),
                f"{name}: {got[name].size} elements where onnxruntime "
                f"gives shape {list(ref.shape)}",
            )
        g = got[name].reshape(ref.shape)
        v = max_violation(g, ref)
        if v > worst[0] or not worst[1]:
            err = float(np.nanmax(np.abs(g.astype(np.float64) - ref), initial=0.0))
            worst = (
                v,
                f"{name}: {count_wrong(g, ref)} of {ref.size} elements wrong, max error {err:.3g}",
            )
    return worst


def compare(
    got: dict[str, np.ndarray],
    want: dict[str, np.ndarray],
    times: dict[str, float],
    exact: Callable[[], tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] | None = None,
) -> CaseResult:
    """PASS within D-COMPILE-TOL of onnxruntime (`want`); else the outputs
    off onnxruntime are judged against `exact()`, (exact, spread) of
    graph_exact: REFERENCE-INEXACT when onnxruntime's are within their
    rounding allowance and ours within D-COMPILE-TOL of `exact`, or no further from it than
    onnxruntime's and within the same allowance (m54: an InstanceNormalization
    of rows equal to a few ulps amplifies each op's rounding past the
    tolerance, ours 2.09 tolerances off, onnxruntime 2.82), MISCOMPILE
    otherwise: also
    when the evaluator cannot run the model or gives such an output another
    size (onnx's reference MaxPool sizes a window longer than its input
    unlike onnxruntime and shape inference), and when an output's size is not
    onnxruntime's."""
    v, where = _worst(got, want)
    if v <= 1.0:
        return CaseResult("PASS", "compare", "", times=times, violation=v)
    off = [k for k in want if _worst({k: got[k]}, {k: want[k]})[0] > 1.0]
    if exact is not None and all(got[k].size == want[k].size for k in off):
        try:
            ideal, spread = exact()
        except Exception as e:  # noqa: BLE001 - an evaluator that cannot run it
            where += f" (no exact evaluation: {type(e).__name__}: {str(e)[:80]})"
        else:
            sized = [k for k in off if ideal[k].size != want[k].size]
            if sized:  # the evaluators disagree on a shape: nothing to judge by
                where += (
                    " (the exact evaluation sizes "
                    + ", ".join(f"{k} {ideal[k].size}" for k in sized)
                    + ")"
                )
                return CaseResult(
                    "MISCOMPILE", "compare", where, times=times, violation=v, wrong=where
                )
            # where an intermediate overflows in the exact evaluation and not
            # in onnxruntime, the model's value depends on each kernel's
            # internal precision (m306: Exp past f16's range, then Softsign)
            over = {
                k: ~np.isfinite(ideal[k]) & np.isfinite(want[k].reshape(ideal[k].shape))
                for k in off
            }
            judge = {
                k: {n: np.where(over[n], ideal[n], a[n].reshape(ideal[n].shape)) for n in off}
                for k, a in (("ours", got), ("ort", want))
            }
            ours, _ = _worst(judge["ours"], {k: ideal[k] for k in off})
            ort, ort_where = _worst(judge["ort"], {k: ideal[k] for k in off})
            allowed = max(allowance_violation(judge["ort"][k], ideal[k], spread[k]) for k in off)
            ours_allowed = max(
                allowance_violation(judge["ours"][k], ideal[k], spread[k]) for k in off
            )
            unjudged = sum(int(m.sum()) for m in over.values())
            note = (
                f"; {unjudged} elements not judged: the exact evaluation overflows there, "
                f"onnxruntime does not"
                if unjudged
                else ""
            )
            if allowed <= 1.0 and (ours <= 1.0 or (ours <= ort and ours_allowed <= 1.0)):
                return CaseResult(
                    "REFERENCE-INEXACT",
                    "compare",
                    f"onnxruntime {ort:.3g} tolerances off the exact evaluation "
                    f"({ort_where}; {allowed:.2g} of its rounding allowance), "
                    f"ours {ours:.3g}{note}",
                    times=times,
                    violation=v,
                )
            where += (
                f" (exact evaluation: ours {ours:.3g} tolerances off, onnxruntime "
                f"{ort:.3g}, {allowed:.2g} of its rounding allowance{note})"
            )
    return CaseResult("MISCOMPILE", "compare", where, times=times, violation=v, wrong=where)


# ---------------------------------------------------------------------------
# isolation


@dataclass
class Child:
    """A forked case: its pid, where it writes its result, its deadline."""

    pid: int
    out: Path
    deadline: float
    tag: object = None


def fork_case(
    fn: Callable[[], CaseResult], out: Path, wall: float, mem_gb: float = MEM_GB, tag: object = None
) -> Child:
    """Run `fn` in a forked child under RLIMIT_AS; it writes its CaseResult
    as JSON to `out`.  `collect` gathers it (or what became of the child)."""
    out.unlink(missing_ok=True)
    step = out.with_suffix(".step")
    step.unlink(missing_ok=True)
    trace = out.with_suffix(".trace")
    pid = os.fork()
    if pid == 0:  # the child: never returns
        global STEP_FILE
        STEP_FILE = step
        faulthandler.enable(file=open(trace, "w"))  # where a signal stops it  # noqa: SIM115
        code = 0
        try:
            limit = int(mem_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            res = fn()
        except BaseException as e:  # noqa: BLE001 - anything is an outcome
            res = CaseResult("CRASH", "", f"{type(e).__name__}: {e}".splitlines()[0])
        try:
            out.write_text(json.dumps(asdict(res)))
        except BaseException:  # noqa: BLE001
            code = 3
        os._exit(code)
    return Child(pid, out, time.monotonic() + wall, tag)


def poll(child: Child) -> CaseResult | None:
    """The child's result when it has ended (None while it runs); a child
    past its wall-clock deadline is killed (TIMEOUT)."""
    pid, status = os.waitpid(child.pid, os.WNOHANG)
    if not pid:
        if time.monotonic() <= child.deadline:
            return None
        os.kill(child.pid, signal.SIGKILL)
        os.waitpid(child.pid, 0)
        step = child.out.with_suffix(".step")
        where = step.read_text() if step.exists() else ""
        step.unlink(missing_ok=True)
        child.out.with_suffix(".trace").unlink(missing_ok=True)
        return CaseResult("TIMEOUT", where, f"{where}: over the case's wall-clock limit (killed)")
    step, trace = child.out.with_suffix(".step"), child.out.with_suffix(".trace")
    where = step.read_text() if step.exists() else ""
    frames = re.findall(
        r'File "([^"]+)", line (\d+) in (\S+)', trace.read_text() if trace.exists() else ""
    )
    step.unlink(missing_ok=True)
    trace.unlink(missing_ok=True)
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        at = f" in {Path(frames[0][0]).name}:{frames[0][1]} {frames[0][2]}" if frames else ""
        return CaseResult("CRASH", where, f"{where or 'child'}: killed by {sig}{at}")
    try:
        return CaseResult.parse(json.loads(child.out.read_text()))
    except (OSError, ValueError):
        return CaseResult("CRASH", "", f"child exited {os.WEXITSTATUS(status)} with no result")


_count = iter(range(1 << 62))


def isolated(
    fn: Callable[[], CaseResult], workdir: Path, wall: float, mem_gb: float = MEM_GB
) -> CaseResult:
    """`fn` in a forked child, waited for."""
    child = fork_case(fn, workdir / f"result-{os.getpid()}-{next(_count)}.json", wall, mem_gb)
    while True:
        r = poll(child)
        if r is not None:
            child.out.unlink(missing_ok=True)
            return r
        time.sleep(0.02)
