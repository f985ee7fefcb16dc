"""Mutation-based input generation: seeds from the repository, hostile edits.

`mutate(rng, seeds, dictionary)` picks a seed and applies 1-4 edits chosen
to reach the classes of hostile input issue 11 lists: truncation, deletion,
duplication and splicing of spans and lines, tokens from a dictionary
(keywords, punctuation, extreme numbers, non-ASCII and non-UTF-8 bytes),
numbers replaced by extreme values, deep nesting (parentheses, brackets,
loop or `affine.for` nests), long operator chains and constant chains.
Everything is driven by `rng`, so (seed, index) reproduces an input.
"""

from __future__ import annotations

import random
import re

EXTREME_NUMBERS = [
    b"0",
    b"1",
    b"-1",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551616",
    b"4294967296",
    b"65536",
    b"99999999999999999999",
    b"1" + b"0" * 400,
    b"00000000000000000000000000001",
    b"1.0e400",
    b"0.0",
    b"1e5",
    b"0x10",
]

COMMON_TOKENS = [
    b"(",
    b")",
    b"[",
    b"]",
    b"{",
    b"}",
    b"<",
    b">",
    b",",
    b"=",
    b":",
    b"..",
    b".",
    b"@",
    b"+",
    b"-",
    b"*",
    b"/",
    b"mod",
    b"\n",
    b" ",
    b"\t",
    b"#",
    b'"',
    b"\\",
    b"\xff",
    b"\xc3",
    "\u0664".encode(),
    "\u00e9".encode(),
    b"\x00",
    b"\r",
    b"\x0b",
]

NEM_TOKENS = [
    b"const",
    b"let",
    b"buffer",
    b"loop",
    b"endloop",
    b"in",
    b"out",
    b"wait",
    b"region",
    b"elem=",
    b"shape=",
    b"layout=",
    b"strides=",
    b"quant=",
    b"deps=",
    b"transfer.async",
    b"transfer.sync",
    b"store.async",
    b"store.sync",
    b"gemm.async",
    b"relu.sync",
    b"add.async",
    b"conv2d.async",
    b"compute.async",
    b"maxpool.async",
    b"softmax.sync",
    b"cast.async",
    b"reshape.async",
    b"@max_in_flight(2)",
    b"@max_in_flight(0)",
    b"@readonly",
    b"@writeonly",
    b"@materialized",
    b"@memmove",
    b"@resource(DMA[0])",
    b"@resource(SEQ[0])",
    b"@seq_engine(1)",
    b"@deterministic",
    b"@debug(x)",
    b"@nope",
    b"DDR",
    b"L2",
    b"L1",
    b"L1[1]",
    b"L1[99]",
    b"f16",
    b"i8",
    b"f32",
    b"bf16",
    b"i4",
    b"u8",
    b"i32",
    b"NHWC",
    b"MK",
    b"device",
    b"include",
    b"program",
    b"type_family",
    b"extends",
    b"topology",
    b"opcode.mandatory",
    b"opcode.extended",
    b"per_tensor(scale=0.5, zero_point=0)",
    b"accum_type=i32",
    b"pads=[1,1,1,1]",
    b'device "npm_lite.nem"',
    b"device npm_pro_x1",
    b'include "npm_lite.nem"',
    b'include "nem_baseline_1.0.nem"',
    b'device ""',
    b"size=",
    b"align=",
]

MLIR_TOKENS = [
    b"%",
    b"%0",
    b"%arg0",
    b"#map",
    b"^bb0",
    b"index",
    b"f16",
    b"f32",
    b"i32",
    b"i64",
    b"memref<",
    b"memref<64xf32>",
    b"memref<?x4xf32>",
    b"tensor<4xf32>",
    b"affine.for",
    b"affine.load",
    b"affine.store",
    b"affine.apply",
    b"affine_map<(d0) -> (d0 * d0)>",
    b"affine_map<(d0) -> (d0 mod 0)>",
    b"affine_map<(d0, d1) -> (d0 floordiv 0)>",
    b"step 0",
    b"step -1",
    b"arith.constant",
    b"arith.addi",
    b"arith.addf",
    b"memref.alloc()",
    b"memref.subview",
    b"memref.copy",
    b"linalg.matmul",
    b"linalg.generic",
    b"async.execute",
    b"async.await",
    b"async.yield",
    b"!async.token",
    b"affine.dma_start",
    b"affine.dma_wait",
    b"func.func",
    b"return",
    b"module",
    b"loc(",
    b"dense<",
    b"1.0e10 : f16",
    b"-> ()",
    b"iter_args",
    b"affine.yield",
    b"scf.for",
    b'"abcdefghijklmnopqrstuvwxyz\\\\\\\\\\\\',
]

_NUMBER = re.compile(rb"\b[0-9]+(?:\.[0-9]+)?\b")


def _span(rng: random.Random, n: int) -> tuple[int, int]:
    a = rng.randrange(n + 1)
    b = min(n, a + rng.choice((1, 2, 4, 8, 32, 128, 1024)))
    return a, b


def _line_spans(data: bytes) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in re.finditer(rb"\n", data):
        spans.append((start, m.end()))
        start = m.end()
    if start < len(data):
        spans.append((start, len(data)))
    return spans


def _nest(rng: random.Random, data: bytes, mlir: bool) -> bytes:
    """Wrap a line in a deep nest: parentheses, brackets, loops, affine.for."""
    depth = rng.choice((8, 30, 63, 64, 65, 100, 300, 1000))
    lines = _line_spans(data)
    if not lines:
        return data
    a, b = rng.choice(lines)
    line = data[a:b]
    kind = rng.randrange(4)
    if kind == 0:
        m = _NUMBER.search(line)
        if m is None:
            return data
        inner = b"(" * depth + m.group() + b")" * depth
        line = line[: m.start()] + inner + line[m.end() :]
    elif kind == 1:
        line = b"[" * depth + line.rstrip(b"\n") + b"]" * depth + b"\n"
    elif kind == 2 and mlir:
        head = b"".join(b"affine.for %%n%d = 0 to 2 {\n" % i for i in range(depth))
        line = head + line + b"}\n" * depth
    elif kind == 2:
        head = b"".join(b"loop n%d in [0..1]:\n" % i for i in range(depth))
        line = head + line + b"endloop\n" * depth
    else:
        t = b"memref<" if mlir else b"("
        c = b">" if mlir else b")"
        line = line.rstrip(b"\n") + b" " + t * depth + b"f32" + c * depth + b"\n"
    return data[:a] + line + data[b:]


def _chain(rng: random.Random, mlir: bool) -> bytes:
    """A long operator expression or a chain of constants that grow."""
    n = rng.choice((10, 64, 255, 256, 257, 1000, 5000))
    if mlir:
        return b"".join(
            b"%%c%d = arith.muli %%c%d, %%c%d : index\n" % (i + 1, i, i) for i in range(n)
        )
    op = rng.choice((b"+", b"*", b" mod ", b"/", b"-"))
    if rng.random() < 0.5:
        return b"const C = 1" + (op + b"2") * n + b"\n"
    first = b"const K0 = 3\n"
    return first + b"".join(b"const K%d = K%d%sK%d\n" % (i + 1, i, op, i) for i in range(n))


def mutate(
    rng: random.Random, seeds: list[bytes], dictionary: list[bytes], mlir: bool = False
) -> bytes:
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.choice((1, 1, 2, 3, 4))):
        n = len(data)
        kind = rng.randrange(12)
        if kind == 0 and n:  # truncate
            del data[rng.randrange(n) :]
        elif kind == 1 and n:  # delete a span
            a, b = _span(rng, n)
            del data[a:b]
        elif kind == 2 and n:  # duplicate a span
            a, b = _span(rng, n)
            data[b:b] = data[a:b] * rng.choice((1, 2, 10, 100))
        elif kind == 3:  # insert a token
            pos = rng.randrange(n + 1)
            data[pos:pos] = rng.choice(dictionary)
        elif kind == 4:  # extreme number
            nums = list(_NUMBER.finditer(data))
            if nums:
                m = rng.choice(nums)
                data[m.start() : m.end()] = rng.choice(EXTREME_NUMBERS)
        elif kind == 5:  # splice another seed
            other = rng.choice(seeds)
            a, b = _span(rng, len(other))
            pos = rng.randrange(n + 1)
            data[pos:pos] = other[a:b]
        elif kind == 6:  # swap two lines
            lines = _line_spans(bytes(data))
            if len(lines) > 1:
                (a1, b1), (a2, b2) = sorted(rng.sample(lines, 2))
                data[:] = data[:a1] + data[a2:b2] + data[b1:a2] + data[a1:b1] + data[b2:]
        elif kind == 7:  # repeat a line
            lines = _line_spans(bytes(data))
            if lines:
                a, b = rng.choice(lines)
                data[b:b] = data[a:b] * rng.choice((2, 10, 200))
        elif kind == 8:  # deep nest
            data[:] = _nest(rng, bytes(data), mlir)
        elif kind == 9:  # operator / const chain
            pos = rng.choice([0, n] + [a for a, _ in _line_spans(bytes(data))])
            data[pos:pos] = _chain(rng, mlir)
        elif kind == 10 and n:  # flip one byte
            i = rng.randrange(n)
            data[i] = rng.randrange(256)
        elif n:  # replace a span with a token
            a, b = _span(rng, n)
            data[a:b] = rng.choice(dictionary)
    return bytes(data)


__all__ = ["mutate", "COMMON_TOKENS", "NEM_TOKENS", "MLIR_TOKENS", "EXTREME_NUMBERS"]
