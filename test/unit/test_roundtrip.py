"""Round-trip properties of the `.nem` parser and printer (hypothesis).

Random valid programs (consts with + - * / mod and parentheses, buffers at
DDR/L2/L1/L1[k], named/let/inline regions with elem/shape/layout-or-strides
and quant descriptors, loops with decorators, transfers, stores, compute
tasks of every registry opcode with deps, waits, decorators, names ending in
`_<digits>`) must satisfy:

* print(parse(x)) is a fixpoint: printing what it parses to changes nothing;
* parse(print(parse(x))) is the same IR as parse(x) (generic MLIR without
  locations, dead integer constants dropped);
* every declared name, every decorator and every quant descriptor of x
  appears in the printed text;
* the verifier reports the same (severity, rule) findings on both;
* printing the IR as generic MLIR and reading it back with xDSL's MLIR
  parser gives the same `.nem` text.
"""

from __future__ import annotations

import re
from collections import Counter
from io import StringIO

import pytest
from hypothesis import HealthCheck, given, settings
from program_generator import OPCODES, Generated, RandomSource, generate, programs
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

from nem.dialect.dialect import nem_context
from nem.dialect.ops import ProgramOp
from nem.dialect.verifier import verify_program
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem

# ---------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------


def _ctx() -> Context:
    return nem_context()


CTX = _ctx()


def generic(module: ModuleOp) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=True, print_debuginfo=False).print_op(module)
    return out.getvalue()


def canonical_ir(module: ModuleOp) -> str:
    """Generic MLIR without locations and without dead `arith` ops (the
    parser materializes constants for decorator arguments and folded
    float values that the IR never uses)."""
    m = module.clone()
    changed = True
    while changed:
        changed = False
        for op in list(m.walk(reverse=True)):
            if op.dialect_name() == "arith" and all(not r.uses for r in op.results):
                op.detach()
                op.erase()
                changed = True
    return generic(m)


def findings(module: ModuleOp) -> Counter:
    prog = next(op for op in module.walk() if isinstance(op, ProgramOp))
    return Counter((d.severity, d.rule) for d in verify_program(prog))


def mlir_roundtrip(module: ModuleOp) -> ModuleOp:
    back = Parser(CTX, generic(module), "<generic>").parse_module()
    back.verify()
    return back


def check_roundtrip(g: Generated) -> None:
    m1 = parse_nem(g.text, "<generated>")
    m1.verify()
    p1 = print_nem(m1)
    m2 = parse_nem(p1, "<printed>")
    m2.verify()
    p2 = print_nem(m2)
    assert p2 == p1, "printing is not a fixpoint"
    assert canonical_ir(m2) == canonical_ir(m1), "parse(print(parse(x))) differs from parse(x)"
    for name in g.names:
        assert re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", p1), f"name {name} lost"
    for deco, count in Counter(g.decos).items():
        assert p1.count(deco) >= count and p1.count(deco) == g.text.count(deco), (
            f"decorator {deco} lost or duplicated"
        )
    for q in g.quants:
        assert f"quant={q}" in p1, f"quant descriptor {q} lost"
    assert findings(m2) == findings(m1), "the verifier sees the printed program differently"
    # generic MLIR: xDSL Printer -> xDSL Parser -> .nem text
    assert print_nem(mlir_roundtrip(m1)) == p1, "generic MLIR round trip changed the program"


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(programs())
@pytest.mark.slow  # 19 s
def test_random_programs_roundtrip(g: Generated):
    check_roundtrip(g)


# ---------------------------------------------------------------------------
# Fixed examples
# ---------------------------------------------------------------------------

GEMM_BIAS_RELU = """\
program gemm_bias_relu:

# --- Compile-time constants ---
const TiM = 64
const K = 256
const N = 128
const T = 4

const elem_bytes = 2                        # f16 = 2 bytes per element
const tileA_bytes = TiM * K * elem_bytes     # 32768
const tileB_bytes = K * N * elem_bytes       # 65536
const tileY_bytes = TiM * N * elem_bytes     # 16384
const bias_bytes = N * elem_bytes            # 256

buffer A_L2 : L2 (size=T * tileA_bytes, align=64)
buffer B_L2 : L2 (size=tileB_bytes, align=64)
buffer C_L2 : L2 (size=bias_bytes, align=64)
buffer Y_L2 : L2 (size=T * tileY_bytes, align=64)

buffer A_L1 : L1 (size=2*tileA_bytes, align=64)
buffer B_L1 : L1 (size=tileB_bytes,   align=64)
buffer Y_L1 : L1 (size=2*tileY_bytes, align=64)

loop i in [0..T-1] @max_in_flight(2):

  let A_tile_i = region(A_L2, i * tileA_bytes, tileA_bytes)
                 elem=f16, shape=[TiM, K], layout=MK

  let Y_tile_i = region(Y_L2, i * tileY_bytes, tileY_bytes)
                 elem=f16, shape=[TiM, N], layout=MN
                 @materialized

  let A_pp_i = region(A_L1, (i mod 2)*tileA_bytes, tileA_bytes)
               elem=f16, shape=[TiM, K], layout=MK

  let Y_pp_i = region(Y_L1, (i mod 2)*tileY_bytes, tileY_bytes)
               elem=f16, shape=[TiM, N], layout=MN
               @materialized

  let B_l1 = region(B_L1, 0, tileB_bytes)
             elem=f16, shape=[K, N], layout=KN

  let C_l2 = region(C_L2, 0, bias_bytes)
             elem=f16, shape=[N], layout=N
             @readonly

  tA = transfer.async(dst=A_pp_i, src=A_tile_i)
  tB = transfer.async(
         dst=B_l1,
         src=region(B_L2, 0, tileB_bytes)
             elem=f16, shape=[K, N], layout=KN
       )
  wait(tA, tB)

  tG = gemm.async
         in  A_pp_i, B_l1, C_l2
         out Y_pp_i
         deps=[tA, tB]
         accum_type=f32

  tR = relu.async
         in  Y_pp_i
         out Y_pp_i @materialized
         deps=[tG]

  tS = store.async(dst=Y_tile_i, src=Y_pp_i, deps=[tR])

endloop
"""

QUANT_AND_NAMES = """\
program q_1:
const c_1 = (3 + 4) * 2 - 10 / 3 mod 2
const c_2 = c_1 * (c_1 - 1)
buffer X_1 : DDR (size=65536) @debug("x")
buffer X_2 : L1[0] (align=64, size=c_2 * 64)
X_3 = region(X_1, 0, 64) elem=i8, shape=[2, 4], layout=NC, quant=per_channel(axis=1, scales=[0.5, 0.25, 1.0, 2.0], zero_points=[0, 1, (0 - 2), 3]) @materialized
let X_4 = region(X_2, c_1, 32) elem=i8, shape=[8], strides=[1], quant=per_group(axis=0, group_size=4, scales=[0.5, 1.0e-05], zero_points=[0, 0])
t_1 = transfer.sync(dst=X_4, src=X_3) @resource(DMA[0])
t_2 = quantize.async in region(X_1, 64, 64) elem=f16, shape=[8], layout=C out X_4 @writeonly deps=[t_1] @resource(VPU[0]) @debug("x")
wait(t_2)
loop i_1 in [0..c_1 - 1] @max_in_flight(2) @deterministic:
  t_3 = relu.sync in region(X_1, i_1 * 8, 8) elem=i8, shape=[8], layout=C, quant=per_tensor(scale=0.125, zero_point=(0 - 1)) out X_3 deps=[t_2] @resource(CSTL[0])
endloop
"""


@pytest.mark.parametrize("text", [GEMM_BIAS_RELU, QUANT_AND_NAMES], ids=["gemm", "quant"])
def test_fixed_examples_roundtrip(text):
    names = re.findall(r"(?:const|let|buffer|loop|program)\s+(\w+)|^\s*(\w+)\s*=", text, re.M)
    names = [a or b for a, b in names]
    decos = re.findall(r"@\w+(?:\([^)]*\)+)?", text)
    quants = re.findall(r"quant=(per_\w+\([^)]*\))", text)
    check_roundtrip(Generated(text, names, decos, quants))


@pytest.mark.slow  # 14 s
def test_generated_text_covers_the_grammar():
    """A check of the generator itself: over 300 seeded programs it produces
    every statement kind, decorator kind, quant form and every opcode, and
    the programs round-trip (a wider net than hypothesis' 50 examples)."""
    texts = [generate(RandomSource(seed)) for seed in range(300)]
    corpus = "\n".join(g.text for g in texts)
    for snippet in [
        "loop ",
        "L1[",
        "DDR",
        "per_channel(",
        "per_group(",
        "per_tensor(",
        "wait(",
        "store.sync",
        "transfer.async",
        " mod ",
        " / ",
        "(",
        "@max_in_flight(",
        "strides=[",
        "layout=",
        "let ",
        "const ",
        "@resource(CSTL[0])",
        '@debug("x")',
        "@materialized",
        "endloop",
        "program ",
    ]:
        assert snippet in corpus, f"the generator never writes {snippet!r}"
    for opcode in OPCODES:
        assert (
            f" {opcode}.async " in corpus
            or f" {opcode}.sync " in corpus
            or f"\n{opcode}." in corpus
        ), f"the generator never writes opcode {opcode}"
    assert re.search(r"\b\w+_\d+\b", corpus)
    # The generator keeps its structural promises (regions inside their
    # buffers, extents that fit the elements, ranks that match, lb <= ub, no
    # division by zero, declared names); opcode typing is left random, so
    # only some programs are free of every error.
    promised = ("REG-", "EXT-", "BUF-", "LOOP-", "CONST-", "NAME-", "GRAM-")
    clean = 0
    for g in texts[:100]:
        errors = [rule for (sev, rule) in findings(parse_nem(g.text)) if sev == "error"]
        broken = [r for r in errors if r and r.startswith(promised)]
        assert not broken, f"generated program breaks {broken}:\n{g.text}"
        clean += not errors
    assert clean >= 20, f"only {clean}/100 generated programs verify without errors"
    for g in texts[:40]:
        check_roundtrip(g)
