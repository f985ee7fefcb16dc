"""The onnx package's backend test data through nem and its peers (issue 32):

  python bench/bench_onnx_backend.py [--peers iree,tvm,onnxruntime] [--only REGEX]
                                     [--device npm_pro_x1] [--route affine]
                                     [--peer-python PATH] [--json OUT] [--cases]

Every case of `onnx/backend/test/data/{pytorch-converted,pytorch-operator,
simple}` (140), judged as onnx's runner judges (`test_data_set_0`,
`Runner.assert_similar_outputs`, the loader's rtol and atol), through:

* nem: `nem.cli.onnx_backend.NemBackend` (nem-compile, then the reference
  runtime's functional mode), in this process, CPU seconds of the compile
  and of the run;
* IREE 3.13 and TVM 0.27 (`bench/onnx_peer_runner.py` run by the peers'
  Python, `--peer-python`, default `$NEM_PEERS_PYTHON` or
  `/work/peers/bin/python`), and onnxruntime (the same runner, in this
  Python), in the same run.

A case passes, is wrong (outputs out of tolerance: a miscompile), or fails
(a diagnostic, a refused input, the peer's error).  It prints, per folder,
the passes of each, the totals and nem's ratio to each peer (passes, and
median compile CPU seconds of the cases both pass); `--cases` adds one row
per case.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
from pathlib import Path

KINDS = ("pytorch-converted", "pytorch-operator", "simple")
RUNNER = Path(__file__).with_name("onnx_peer_runner.py")


def cpu() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def cases(only: str | None) -> list:
    from onnx.backend.test.loader import load_model_tests

    found = [c for kind in KINDS for c in load_model_tests(kind=kind)]
    return [c for c in found if only is None or re.search(only, c.name)]


class _Timeout(Exception):
    pass


def nem_one(case, device: str, route: str | None, timeout: int) -> dict:
    """One case through NemBackend, as onnx's runner runs it."""
    from onnx.backend.test.runner import Runner

    from nem.cli.onnx_backend import NemBackend, load_case

    def alarm(signum, frame):
        raise _Timeout(f"over {timeout} s")

    row: dict = {"case": case.name}
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(timeout)
    t0 = cpu()
    try:
        model, inputs, expected = load_case(case.model_dir)
        kw = {"route": route} if route else {}
        rep = NemBackend.prepare(model, nem_device=device, **kw)
        t1 = cpu()
        outs = rep.run(inputs)
        row.update(compile_s=t1 - t0, run_s=cpu() - t1)
        try:
            Runner.assert_similar_outputs(expected, list(outs), rtol=case.rtol, atol=case.atol)
            row["status"] = "pass"
        except AssertionError as e:
            row.update(status="wrong", detail=(str(e).strip().splitlines() or [""])[0][:160])
    except Exception as e:  # a diagnostic, a refused input, or a crash: the row says which
        text = (str(e).strip().splitlines() or [""])[0]
        row.update(status="fail", detail=f"{type(e).__name__}: {text[:160]}", compile_s=cpu() - t0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return row


def peer_rows(peer: str, python: str, todo: list) -> dict[str, dict]:
    """Every case through `onnx_peer_runner.py` in `python`; a runner that
    dies (a peer's segfault) costs that case only: it is restarted after it."""
    rows: dict[str, dict] = {}
    left = list(todo)
    while left:
        cmd = [python, str(RUNNER), peer, *[c.model_dir for c in left]]
        p = subprocess.run(cmd, capture_output=True, text=True)
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                rows[row["case"]] = row
        left = [c for c in left if c.name not in rows]
        if left and p.returncode:
            first = left.pop(0)
            rows[first.name] = {
                "case": first.name,
                "status": "fail",
                "detail": f"runner died (exit {p.returncode})",
            }
        elif left:
            for c in left:
                rows[c.name] = {"case": c.name, "status": "fail", "detail": "no result"}
            left = []
    return rows


def table(results: dict[str, dict[str, dict]], todo: list, show_cases: bool) -> str:
    names = list(results)
    lines = []
    if show_cases:
        lines.append("| case | " + " | ".join(names) + " |")
        lines.append("|---" * (len(names) + 1) + "|")
        for c in todo:
            cells = []
            for n in names:
                r = results[n].get(c.name, {})
                s = r.get("status", "-")
                cells.append(s if s == "pass" else f"{s}: {r.get('detail', '')[:70]}")
            lines.append(f"| {c.name} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("| folder | " + " | ".join(names) + " |")
    lines.append("|---" * (len(names) + 1) + "|")
    kind_of = {c.name: Path(c.model_dir).parent.name for c in todo}
    for kind in KINDS:
        members = [c.name for c in todo if kind_of[c.name] == kind]
        if not members:
            continue
        counts = [
            sum(results[n].get(m, {}).get("status") == "pass" for m in members) for n in names
        ]
        lines.append(f"| {kind} ({len(members)}) | " + " | ".join(map(str, counts)) + " |")
    totals = {n: sum(r.get("status") == "pass" for r in results[n].values()) for n in names}
    lines.append(
        f"| **total ({len(todo)})** | " + " | ".join(f"**{totals[n]}**" for n in names) + " |"
    )
    wrong = {n: sum(r.get("status") == "wrong" for r in results[n].values()) for n in names}
    lines.append("| wrong results | " + " | ".join(str(wrong[n]) for n in names) + " |")
    lines.append("")
    for n in names[1:]:
        both = [
            c.name
            for c in todo
            if results["nem"].get(c.name, {}).get("status") == "pass"
            and results[n].get(c.name, {}).get("status") == "pass"
        ]
        ratio = [
            results["nem"][m]["compile_s"] / max(results[n][m]["compile_s"], 1e-3) for m in both
        ]
        med = f"{statistics.median(ratio):.2f}x" if ratio else "n/a"
        lines.append(
            f"nem vs {n}: {totals['nem']} vs {totals[n]} passes "
            f"({totals['nem'] - totals[n]:+d}); median compile CPU ratio nem/{n} "
            f"over the {len(both)} cases both pass: {med}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--peers", default="iree,tvm,onnxruntime")
    p.add_argument("--only", metavar="REGEX", help="cases whose name matches")
    p.add_argument("--device", default="npm_pro_x1")
    p.add_argument("--route", default=None, help="nem-compile --route (default: its default)")
    p.add_argument(
        "--peer-python", default=os.environ.get("NEM_PEERS_PYTHON", "/work/peers/bin/python")
    )
    p.add_argument("--timeout", type=int, default=300, help="seconds per nem case")
    p.add_argument("--json", metavar="OUT", help="write every row as JSON")
    p.add_argument("--cases", action="store_true", help="one row per case")
    args = p.parse_args(argv)
    todo = cases(args.only)
    results: dict[str, dict[str, dict]] = {"nem": {}}
    for c in todo:
        results["nem"][c.name] = nem_one(c, args.device, args.route, args.timeout)
        print(f"nem {c.name}: {results['nem'][c.name]['status']}", file=sys.stderr, flush=True)
    for peer in [x for x in args.peers.split(",") if x]:
        python = sys.executable if peer == "onnxruntime" else args.peer_python
        if not Path(python).exists():
            print(f"bench: {peer}: no Python at {python} (--peer-python)", file=sys.stderr)
            continue
        results[peer] = peer_rows(peer, python, todo)
        print(f"{peer}: done", file=sys.stderr, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(table(results, todo, args.cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
