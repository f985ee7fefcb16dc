"""Fuzz harness for the NEM tools (issue 11): targets, outcomes, campaigns.

Every input is run in-process through a tool's `main` (as a user would run
`nem-opt`/`nem-run`), with a per-input limit in CPU seconds (so that a
loaded machine does not turn slow inputs into hangs), and classified
(`outcomes.py` runs and classifies; this module holds the targets and
the campaigns):

  ok          exit 0, no error printed
  diagnostic  exit 1 (or nem-run's usage exit 2), every error located
              (`file:line:col: error:` or `nem-run: error: <flag>: ...`)
  internal    "internal error" or a traceback: a bug
  unlocated   an `error:` line with no location and no flag
  exit        errors printed but exit 0, or an exit status other than 0/1/2
  hang        over the per-input CPU-time limit
  crash       the worker process died (memory limit, C stack)

Targets (`TARGETS`, add one with `register`): `nem-opt`, `nem-verify`
(mutated `.nem` seeds from examples/ and test/lit), `nem-grammar`
(grammar-generated programs through `-p nem-verify`), `nem-run` (mutated and
generated programs), `mlir` (mutated MLIR through `lower-to-nem`), `cli`
(random command lines of nem-opt, nem-run and nem-compile over hostile
files), `onnx` (ONNX
models with mutated protobuf fields through `nem-compile`), `arrays`
(`.npy`/`.npz` files with mutated headers through `nem-run --input`;
`file_gen.py`).  A target is a
name, a generator `rng -> bytes` and a runner `(bytes, workdir) -> Result`;
the bytecode loader adds itself the same way.

Usage (from the repository root):

  python test/fuzz/harness.py smoke [--count N] [--seed S]           # all targets
  python test/fuzz/harness.py campaign --target T --seconds 1800 \\
         [--timeout 10] [--mem-gb 3] [--seed S] [--findings DIR]
  python test/fuzz/harness.py run --target T FILE...                 # replay inputs

A campaign forks a worker under `ulimit -v` (RLIMIT_AS), which generates
input i from (seed, target, i) and runs it; a worker that stalls past the
time limit is killed and the input recorded as a hang; findings are written
to `findings/<target>/<outcome>-<hash>` with the tool's output beside them.
Every finding that was fixed is kept in `test/fuzz/corpus/<target>/`, which
`test/unit/test_fuzz_corpus.py` replays.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import multiprocessing as mp
import os
import random
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from file_gen import gen_array, gen_onnx, npy_bytes  # noqa: E402
from gen_nem import gen_program  # noqa: E402
from mutate import COMMON_TOKENS, MLIR_TOKENS, NEM_TOKENS, mutate  # noqa: E402
from outcomes import Result, run_main, run_with_timeout  # noqa: E402

CORPUS = HERE / "corpus"
GOOD = ("ok", "diagnostic")


# ---------------------------------------------------------------------------
# Seeds


def _files(patterns: list[str]) -> list[bytes]:
    out = []
    for pat in patterns:
        for p in sorted(ROOT.glob(pat)):
            if p.is_file() and "Output" not in p.parts:
                out.append(p.read_bytes())
    return out


def nem_seeds() -> list[bytes]:
    return _files(["examples/*.nem", "test/lit/**/*.nem", "devices/nem/devices/npm_*.nem"])


def mlir_seeds() -> list[bytes]:
    return _files(["test/lit/lowering/Inputs/*.mlir", "test/lit/**/*.mlir"])


_SEEDS: dict[str, list[bytes]] = {}


def seeds(kind: str) -> list[bytes]:
    if kind not in _SEEDS:
        _SEEDS[kind] = nem_seeds() if kind == "nem" else mlir_seeds()
    return _SEEDS[kind]


# ---------------------------------------------------------------------------
# Targets


@dataclass
class Target:
    name: str
    suffix: str
    generate: Callable[[random.Random], bytes]
    run: Callable[[bytes, Path], tuple[int, str, str]]


TARGETS: dict[str, Target] = {}


def register(target: Target) -> Target:
    TARGETS[target.name] = target
    return target


def _file_runner(tool: str, extra: list[str], suffix: str):
    def run(data: bytes, work: Path) -> tuple[int, str, str]:
        path = work / f"input{suffix}"
        path.write_bytes(data)
        return run_main(tool, [str(path), *extra])

    return run


NEM_DICT = COMMON_TOKENS + NEM_TOKENS
MLIR_DICT = COMMON_TOKENS + MLIR_TOKENS
RUN_FLAGS = ["--random-inputs", "1", "--max-tasks", "20000", "--no-progress"]


def _gen_nem_mutant(rng: random.Random) -> bytes:
    return mutate(rng, seeds("nem"), NEM_DICT)


def _gen_grammar(rng: random.Random) -> bytes:
    return gen_program(rng).encode()


def _gen_run_input(rng: random.Random) -> bytes:
    if rng.random() < 0.5:
        return _gen_grammar(rng)
    return _gen_nem_mutant(rng)


def _gen_mlir(rng: random.Random) -> bytes:
    return mutate(rng, seeds("mlir"), MLIR_DICT, mlir=True)


register(Target("nem-opt", ".nem", _gen_nem_mutant, _file_runner("nem-opt", [], ".nem")))
register(
    Target(
        "nem-verify", ".nem", _gen_nem_mutant, _file_runner("nem-opt", ["-p", "nem-verify"], ".nem")
    )
)
register(
    Target(
        "nem-grammar", ".nem", _gen_grammar, _file_runner("nem-opt", ["-p", "nem-verify"], ".nem")
    )
)
register(Target("nem-run", ".nem", _gen_run_input, _file_runner("nem-run", RUN_FLAGS, ".nem")))
register(
    Target(
        "mlir",
        ".mlir",
        _gen_mlir,
        _file_runner("nem-opt", ["-p", "lower-to-nem{device=npm_pro_x1}", "-t", "nem"], ".mlir"),
    )
)


# -- command lines ------------------------------------------------------------
# A `cli` input is JSON: {"tool": ..., "args": [...]}; "@NAME" arguments are
# files the runner creates (hostile ones among them).


def _make_files(work: Path) -> dict[str, str]:
    import numpy as np

    prog = (ROOT / "examples" / "gemm_bias_relu.nem").read_text()
    files = {
        "@PROG": (
            "prog.nem",
            prog.replace('device "npm_lite.nem"', 'include "npm_lite.nem"\ndevice npm_lite'),
        ),
        "@MLIR": ("in.mlir", (ROOT / "test/lit/lowering/Inputs/eltwise_tiled.mlir").read_text()),
        "@ASYNC": (
            "async.mlir",
            (ROOT / "test/lit/lowering/Inputs/async_pipeline.mlir").read_text(),
        ),
        "@EMPTY": ("empty.nem", ""),
        "@BADUTF8": ("bad.nem", "const A = 1\n\udcff\n"),
        "@PROFILE_LIST": ("plist.json", "[1, 2]"),
        "@PROFILE_ZERO": ("pzero.json", '{"DMA": {"bandwidth": 0}}'),
        "@PROFILE_NEG": ("pneg.json", '{"DMA": {"bandwidth": -4, "latency": 1}}'),
        "@PROFILE_TYPE": ("ptype.json", '{"NMU": {"macs": "many"}}'),
        "@PROFILE_BAD": ("pbad.json", "{not json"),
        "@PROFILE_OK": ("pok.json", '{"DMA": {"bandwidth": 64, "latency": 8}}'),
        "@RAW": ("short.bin", "abc"),
        "@NPY0": ("zero.npy", ""),
    }
    out = {}
    for key, (name, text) in files.items():
        p = work / name
        p.write_bytes(text.encode("utf-8", errors="surrogateescape"))
        out[key] = str(p)
    np.save(work / "scalar.npy", np.float16(1.5))
    np.save(work / "arr.npy", np.zeros((64, 256), np.float16))
    np.savez(work / "arch.npz", a=np.zeros(3))
    (work / "arch2.npy").write_bytes((work / "arch.npz").read_bytes())
    (work / "sub").mkdir(exist_ok=True)
    (work / "relu.onnx").write_bytes(_relu_onnx())
    np.save(work / "x.npy", np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    out.update(_hostile_arrays(work))
    out.update(
        {
            "@NPY0D": str(work / "scalar.npy"),
            "@NPY": str(work / "arr.npy"),
            "@NPZ": str(work / "arch.npz"),
            "@NPZ_AS_NPY": str(work / "arch2.npy"),
            "@DIR": str(work / "sub"),
            "@OUT": str(work / "out.bin"),
            "@OUTNPY": str(work / "out.npy"),
            "@MISSING": str(work / "no/such/dir/x"),
            "@DEVNULL": "/dev/null",
            "@DEVFULL": "/dev/full",
            "@DEVZERO": "/dev/zero",
            "@TRACE": str(work / "t.json"),
            "@ONNX": str(work / "relu.onnx"),
            "@X": str(work / "x.npy"),
        }
    )
    return out


@functools.cache
def _relu_onnx() -> bytes:
    """A one-node model (Relu of f32 [2, 3], input `x`) for nem-compile's
    command lines: small enough that a whole compile takes a second."""
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _patched_zip(member: str, data: bytes, declared: int) -> bytes:
    """A one-member zip (stored) whose local and central headers declare
    `declared` uncompressed bytes: what a decompression bomb declares."""
    import io
    import struct
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(member, data)
    raw = bytearray(buf.getvalue())
    raw[22:26] = struct.pack("<I", declared)  # local header
    central = raw.rindex(b"PK\x01\x02")
    raw[central + 24 : central + 28] = struct.pack("<I", declared)
    return bytes(raw)


def _hostile_arrays(work: Path) -> dict[str, str]:
    """Array files whose headers lie (issue 33): shapes far past any
    buffer, an absurd header length, archive members declaring gigabytes;
    and a FIFO, which no tool may open."""
    import io
    import zipfile

    huge = npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (1099511627776,), }")
    files = {
        "@NPY_HUGE": ("huge.npy", huge),
        "@NPY_HDRLEN": (
            "hdrlen.npy",
            npy_bytes(
                "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }",
                version=2,
                header_len=0xFFFFFFFF,
            ),
        ),
        "@NPY_OBJECT": (
            "obj.npy",
            npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", b"\x80\x04N."),
        ),
        "@NPZ_BOMB": ("bomb.npz", _patched_zip("A_L2.npy", huge, 2**30)),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("A_L2.npy", huge)
    files["@NPZ_HUGE"] = ("hugehdr.npz", buf.getvalue())
    out = {}
    for key, (name, data) in files.items():
        (work / name).write_bytes(data)
        out[key] = str(work / name)
    fifo = work / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    out["@FIFO"] = str(fifo)
    return out


_RUN_ARGS = [
    ["--mode", "timed"],
    ["--mode", "functional"],
    ["--schedule", "random"],
    ["--seed", "-5"],
    ["--seed", "3"],
    ["--schedules", "2"],
    ["--schedules", "0"],
    ["--schedules", "-1"],
    ["--random-inputs", "1"],
    ["--random-inputs", "-1"],
    ["--max-tasks", "1"],
    ["--max-tasks", "0"],
    ["--max-tasks", "-7"],
    ["--ddr-size", "0"],
    ["--ddr-size", "-1"],
    ["--ddr-size", "4096"],
    ["--device", "npm_pro_x1"],
    ["--device", "nope"],
    ["--device", "@PROFILE_OK"],
    ["-I", "@DIR"],
    ["-I", "@MISSING"],
    ["--no-races"],
    ["--input", "A_L2=@NPY"],
    ["--input", "A_L2=@NPY0"],
    ["--input", "A_L2=@NPY0D"],
    ["--input", "A_L2=@NPZ"],
    ["--input", "A_L2=@NPZ_AS_NPY"],
    ["--input", "A_L2=@RAW"],
    ["--input", "A_L2=@DEVZERO"],
    ["--input", "A_L2=@DIR"],
    ["--input", "NOPE=@NPY"],
    ["--input", "A_L2"],
    ["--input", "=@NPY"],
    ["--output", "Y_L2=@OUT"],
    ["--output", "Y_L2=@OUTNPY"],
    ["--output", "NOPE=@OUT"],
    ["--output", "Y_L2=@MISSING"],
    ["--output", "Y_L2=@DIR"],
    ["--output", "Y_L2=@DEVFULL"],
    ["--trace", "@TRACE"],
    ["--trace", "@MISSING"],
    ["--trace", "@DIR"],
    ["--timeline", "@MISSING"],
    ["--profile", "@PROFILE_LIST"],
    ["--profile", "@PROFILE_ZERO"],
    ["--profile", "@PROFILE_NEG"],
    ["--profile", "@PROFILE_TYPE"],
    ["--profile", "@PROFILE_BAD"],
    ["--profile", "@PROFILE_OK"],
    ["--profile", "@MISSING"],
    ["--bogus"],
    ["--input", "A_L2=@NPY_HUGE"],
    ["--input", "A_L2=@NPY_HDRLEN"],
    ["--input", "A_L2=@NPY_OBJECT"],
    ["--input", "@NPZ_BOMB"],
    ["--input", "@NPZ_HUGE"],
    ["--input", "A_L2=@FIFO"],
    ["--input-raw", "A_L2=@DEVZERO"],
    ["--output", "Y_L2=@PROG"],
    ["--trace", "@PROG"],
    ["--profile", "@FIFO"],
]
_OPT_ARGS = [
    ["-p", "nem-verify"],
    ["-p", "nem-fold-consts"],
    ["-p", "lower-to-nem"],
    ["-p", "lower-to-nem{device=npm_pro_x1}"],
    ["-p", "convert-affine-to-nem"],
    ["-p", "lower-to-nem{memory-spaces=0:DDR,9:L7}"],
    ["-p", "nem-verify{"],
    ["-p", "no-such-pass"],
    ["-t", "nem"],
    ["-t", "mlir"],
    ["-f", "mlir"],
    ["-f", "nem"],
    ["--print-op-generic"],
    ["--split-input-file"],
    ["--verify-diagnostics"],
    ["--device", "npm_lite"],
    ["--device", "nope"],
    ["--print-device", "npm_pro_x1"],
    ["--print-device", "nope"],
    ["-I", "@DIR"],
    ["-o", "@OUT"],
    ["-o", "@MISSING"],
    ["-o", "@DIR"],
    ["--bogus"],
    ["-o", "@PROG"],
    ["-t", "nemb", "--embed", "A_L2=@DEVZERO"],
    ["-t", "nemb", "--embed", "A_L2=@FIFO"],
    ["-t", "nemb", "--embed", "A_L2=@NPY_HUGE"],
    ["-t", "nemb", "--embed", "A_L2=@NPY"],
]
_COMPILE_ARGS = [
    ["--device", "nope"],
    ["--device", "npm_lite"],
    ["--engines", "99"],
    ["--engines", "0"],
    ["--engines", "1"],
    ["--tile-sizes", "0"],
    ["--tile-sizes", "2,2"],
    ["--tile-sizes", "99999999999999999999"],
    ["--route", "affine"],
    ["--route", "nope"],
    ["--no-pipeline"],
    ["--no-verify"],
    ["--no-simplify"],
    ["--max-nodes", "0"],
    ["--max-model-bytes", "10"],
    ["--max-source-bytes", "10"],
    ["--error-limit", "-1"],
    ["--dump-after", "import"],
    ["--save-temps"],
    ["--bisect"],
    ["--input", "x=@X"],
    ["--input", "x=@FIFO"],
    ["--input", "x=@NPY"],
    ["--input", "@NPZ"],
    ["--input", "x=@NPY_HUGE"],
    ["--input", "x=@DEVZERO"],
    ["--input", "@NPZ_BOMB"],
    ["--input", "nope=@X"],
    ["--seed", "-1"],
    ["-o", "@OUT"],
    ["-o", "@MISSING"],
    ["-o", "@DIR"],
    ["-o", "@ONNX"],
    ["-o", "@X"],
    ["-o", "@DEVFULL"],
    ["-I", "@DIR"],
    ["-I", "@MISSING"],
    ["-v"],
    ["--bogus"],
]
_PROGRAMS = [
    "@PROG",
    "@MLIR",
    "@ASYNC",
    "@EMPTY",
    "@BADUTF8",
    "@DIR",
    "@DEVZERO",
    "@MISSING",
    "@DEVNULL",
    "@FIFO",
]
_MODELS = ["@ONNX", "@ONNX", "@MLIR", "@PROG", "@DIR", "@FIFO", "@DEVZERO", "@MISSING"]
_POOLS = {
    "nem-opt": (_PROGRAMS, _OPT_ARGS),
    "nem-run": (_PROGRAMS, _RUN_ARGS),
    "nem-compile": (_MODELS, _COMPILE_ARGS),
}


def _gen_cli(rng: random.Random) -> bytes:
    tool = rng.choice(sorted(_POOLS))
    programs, pool = _POOLS[tool]
    args = [rng.choice(programs)]
    for _ in range(rng.randint(0, 4)):
        args += rng.choice(pool)
    rng.shuffle(args) if rng.random() < 0.1 else None
    return json.dumps({"tool": tool, "args": args}).encode()


def _run_cli(data: bytes, work: Path) -> tuple[int, str, str]:
    spec = json.loads(data)
    files = _make_files(work)

    def subst(a: str) -> str:
        for key in sorted(files, key=len, reverse=True):
            a = a.replace(key, files[key])
        return a

    argv = [subst(a) for a in spec["args"]]
    if spec["tool"] == "nem-run" and "--max-tasks" not in argv:
        argv += ["--max-tasks", "20000", "--no-progress"]
    if spec["tool"] == "nem-compile":
        argv += ["--no-progress"] + ([] if "-o" in argv else ["-o", str(work / "out.nem")])
    return run_main(spec["tool"], argv)


register(Target("cli", ".json", _gen_cli, _run_cli))


# -- ONNX models and array files (issue 33) -----------------------------------


def _run_onnx(data: bytes, work: Path) -> tuple[int, str, str]:
    """nem-compile on a mutated model, beside the files its external data
    may name: w.bin (32 bytes) and a FIFO."""
    (work / "w.bin").write_bytes(bytes(range(32)))
    _hostile_arrays(work)  # makes work/fifo
    model = work / "input.onnx"
    model.write_bytes(data)
    return run_main("nem-compile", [str(model), "-o", str(work / "out.nem"), "--no-progress"])


def _run_array(data: bytes, work: Path) -> tuple[int, str, str]:
    """nem-run of the fuzz program with the file as `--input A_L2=` (a
    `.npy`) or as a bare `--input` archive (a `.npz`)."""
    prog = _make_files(work)["@PROG"]
    if data[:2] == b"PK":
        path = work / "input.npz"
        path.write_bytes(data)
        args = ["--input", str(path)]
    else:
        path = work / "input.npy"
        path.write_bytes(data)
        args = ["--input", f"A_L2={path}"]
    return run_main("nem-run", [prog, *args, "--max-tasks", "20000", "--no-progress"])


register(Target("onnx", ".onnx", gen_onnx, _run_onnx))
register(Target("arrays", ".npy", gen_array, _run_array))


# ---------------------------------------------------------------------------
# Driving


def input_for(target: Target, seed: int, index: int) -> bytes:
    return target.generate(random.Random(f"{seed}:{target.name}:{index}"))


def run_input(target: Target, data: bytes, timeout: float = 10.0) -> Result:
    with tempfile.TemporaryDirectory(prefix="nem-fuzz-") as tmp:
        return run_with_timeout(lambda: target.run(data, Path(tmp)), timeout)


def smoke(names: list[str], count: int, seed: int, timeout: float) -> dict[str, Counter]:
    stats: dict[str, Counter] = {}
    for name in names:
        t = TARGETS[name]
        c: Counter = Counter()
        for i in range(count):
            res = run_input(t, input_for(t, seed, i), timeout)
            c[res.outcome] += 1
            if res.outcome not in GOOD:
                print(f"{name} #{i}: {res.outcome}\n{res.err[-2000:]}", file=sys.stderr)
        stats[name] = c
    return stats


def _worker(name: str, seed: int, start: int, conn, mem_bytes: int, timeout: float) -> None:
    if mem_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    t = TARGETS[name]
    i = start
    while True:
        conn.send(("start", i))
        data = input_for(t, seed, i)
        # the parent enforces the hard limit; this alarm only makes slow
        # inputs report as hangs without killing the worker
        res = run_input(t, data, timeout)
        conn.send(("done", i, res.outcome, res.seconds, res.err[-4000:]))
        i += 1


def save_finding(findings: Path, target: Target, outcome: str, data: bytes, err: str) -> Path:
    d = findings / target.name
    d.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha1(data).hexdigest()[:12]
    path = d / f"{outcome}-{h}{target.suffix}"
    path.write_bytes(data)
    path.with_suffix(path.suffix + ".txt").write_text(err)
    return path


def campaign(
    name: str, seconds: float, seed: int, timeout: float, mem_gb: float, findings: Path
) -> dict:
    t = TARGETS[name]
    import nem.cli.nem_compile  # noqa: F401
    import nem.cli.nem_opt  # noqa: F401 - imported once, before the workers fork
    import nem.cli.nem_run  # noqa: F401

    ctx = mp.get_context("fork")
    stats: Counter = Counter()
    slowest = 0.0
    deadline = time.monotonic() + seconds
    index = 0
    while time.monotonic() < deadline:
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_worker, args=(name, seed, index, child, int(mem_gb * 2**30), timeout)
        )
        proc.start()
        current, started = index, time.monotonic()
        while time.monotonic() < deadline:
            if parent.poll(0.5):
                try:
                    msg = parent.recv()
                except EOFError:
                    break
                if msg[0] == "start":
                    current, started = msg[1], time.monotonic()
                else:
                    _, i, outcome, secs, err = msg
                    stats[outcome] += 1
                    slowest = max(slowest, secs)
                    if outcome not in GOOD:
                        save_finding(findings, t, outcome, input_for(t, seed, i), err)
                    index = i + 1
            elif not proc.is_alive():
                break
            elif time.monotonic() - started > 10 * timeout + 30:
                break  # wall-clock backstop for a worker that no longer runs Python
        if proc.is_alive() and time.monotonic() < deadline:
            proc.kill()  # stalled past the hard limit: the input hangs
            stats["hang"] += 1
            save_finding(findings, t, "hang", input_for(t, seed, current), "")
            index = current + 1
        elif not proc.is_alive() and time.monotonic() < deadline:
            stats["crash"] += 1
            save_finding(
                findings,
                t,
                "crash",
                input_for(t, seed, current),
                f"worker exit code {proc.exitcode}",
            )
            index = current + 1
        proc.kill()
        proc.join()
    return {
        "target": name,
        "inputs": sum(stats.values()),
        "outcomes": dict(stats),
        "slowest_s": round(slowest, 2),
        "seconds": seconds,
        "seed": seed,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("smoke")
    s.add_argument("--target", action="append")
    s.add_argument("--count", type=int, default=20)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--timeout", type=float, default=10.0)
    c = sub.add_parser("campaign")
    c.add_argument("--target", required=True, choices=sorted(TARGETS))
    c.add_argument("--seconds", type=float, default=1800)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--timeout", type=float, default=10.0)
    c.add_argument("--mem-gb", type=float, default=3.0)
    c.add_argument("--findings", type=Path, default=ROOT / "findings")
    r = sub.add_parser("run")
    r.add_argument("--target", required=True, choices=sorted(TARGETS))
    r.add_argument("files", nargs="+", type=Path)
    r.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args(argv)
    if args.cmd == "smoke":
        stats = smoke(args.target or sorted(TARGETS), args.count, args.seed, args.timeout)
        print(json.dumps({k: dict(v) for k, v in stats.items()}, indent=1))
        return 0 if all(set(v) <= set(GOOD) for v in stats.values()) else 1
    if args.cmd == "campaign":
        print(
            json.dumps(
                campaign(
                    args.target, args.seconds, args.seed, args.timeout, args.mem_gb, args.findings
                )
            )
        )
        return 0
    bad = 0
    for f in args.files:
        res = run_input(TARGETS[args.target], f.read_bytes(), args.timeout)
        print(f"{f}: {res.outcome} (exit {res.code}, {res.seconds:.1f}s)")
        if res.outcome not in GOOD:
            bad += 1
            print(res.err[-3000:])
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
