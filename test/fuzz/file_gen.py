"""Generators of hostile ONNX models and array files (issue 33): structured
mutations of protobuf fields and `.npy`/`.npz` headers, not only bytes.

`gen_onnx(rng)` starts from one of a few small valid models (`SEEDS`) and
applies one to three field mutations (opsets and IR version, an
initializer's dims, type or data, a node's attribute type, a value written
twice or under a graph input's name, empty names, huge or negative dims,
external data pointing at a FIFO, at /dev/zero or past its file, many
nodes), sometimes followed by byte mutations of the serialized model.
`gen_array(rng)` writes a `.npy` (or a `.npz` of them) for the fuzzed
program's buffer `A_L2` (f16, 65536 elements): a third are files numpy
wrote of arrays near that (most load, so the run goes past the reader),
the others have a mutated header: shape, dtype, declared header length,
version, declared archive sizes.
"""

from __future__ import annotations

import io
import random
import struct
import zipfile

INTERESTING = [0, -1, -3, 1, 2, 7, 17, 2**31 - 1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1]


def _seeds():
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper

    def model(nodes, inputs, outputs, inits=()):
        g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
        return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)

    def vi(name, shape, t=T.FLOAT):
        return h.make_tensor_value_info(name, t, shape)

    w = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(2, 4), "w")
    k = numpy_helper.from_array(np.ones((4, 2, 3, 3), np.float32), "k")
    shape = numpy_helper.from_array(np.array([4, 2], np.int64), "shape")
    return [
        model(
            [h.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2, 4])], [vi("y", [2, 4])]
        ),
        model(
            [h.make_node("Add", ["x", "w"], ["y"], name="add")],
            [vi("x", [2, 4])],
            [vi("y", [2, 4])],
            [w],
        ),
        model(
            [h.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)],
            [vi("x", [2, 4])],
            [vi("y", [2, 4])],
        ),
        model(
            [h.make_node("Conv", ["x", "k"], ["y"], name="conv", pads=[1, 1, 1, 1])],
            [vi("x", [1, 2, 5, 5])],
            [vi("y", [1, 4, 5, 5])],
            [k],
        ),
        model(
            [
                h.make_node("MatMul", ["x", "w"], ["t"], name="mm"),
                h.make_node("Reshape", ["t", "shape"], ["y"], name="rs"),
            ],
            [vi("x", [2, 2])],
            [vi("y", [4, 2])],
            [w, shape],
        ),
        model(
            [
                h.make_node("Constant", [], ["c"], name="c", value=w),
                h.make_node("Mul", ["x", "c"], ["y"], name="mul"),
            ],
            [vi("x", [2, 4])],
            [vi("y", [2, 4])],
        ),
    ], onnx


_SEED_CACHE: list = []


def _mutate_model(rng: random.Random, m, onnx) -> None:
    g = m.graph
    T = onnx.TensorProto
    tensors = list(g.initializer) + [
        a.t for n in g.node for a in n.attribute if a.type == onnx.AttributeProto.TENSOR
    ]
    kind = rng.randrange(14)
    if kind == 0:
        m.opset_import[0].version = rng.choice(INTERESTING)
    elif kind == 1:
        m.ir_version = rng.choice(INTERESTING)
    elif kind == 2 and tensors:
        t = rng.choice(tensors)
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(INTERESTING)
    elif kind == 3 and tensors:
        rng.choice(tensors).data_type = rng.choice(
            [0, 9999, T.STRING, T.INT4, T.DOUBLE, T.COMPLEX64, T.BOOL, T.FLOAT8E4M3FN]
        )
    elif kind == 4 and tensors:
        t = rng.choice(tensors)
        if t.raw_data:
            cut = rng.choice([0, 1, len(t.raw_data) - 1, len(t.raw_data) + 3])
            t.raw_data = (t.raw_data + b"\0" * 8)[:cut]
        else:
            del t.float_data[rng.randrange(len(t.float_data) + 1) :]
    elif kind == 5:
        n = rng.choice(g.node)
        if n.attribute:
            a = rng.choice(n.attribute)
            a.type = rng.choice(
                [
                    onnx.AttributeProto.STRING,
                    onnx.AttributeProto.FLOAT,
                    onnx.AttributeProto.INTS,
                    onnx.AttributeProto.TENSOR,
                ]
            )
            a.s = b"zero"
        else:
            n.attribute.append(onnx.helper.make_attribute("axis", "one"))
    elif kind == 6:
        n = rng.choice(g.node)
        n.output[0] = rng.choice([g.input[0].name, n.input[0] if n.input else "", "y"])
    elif kind == 7:
        g.input[0].name = ""
    elif kind == 8:
        v = rng.choice([*g.input, *g.output])
        dims = v.type.tensor_type.shape.dim
        if dims:
            dims[rng.randrange(len(dims))].dim_value = rng.choice(INTERESTING)
    elif kind == 9:
        g.node.extend([g.node[0]] * rng.choice([1, 2, 5000]))
    elif kind == 10 and tensors:
        t = rng.choice(tensors)
        t.data_location = T.EXTERNAL
        t.ClearField("raw_data")
        del t.external_data[:]
        for key, value in (
            ("location", rng.choice(["fifo", "/dev/zero", "w.bin", "../w.bin", "none.bin"])),
            ("offset", str(rng.choice([0, 4, -8, 2**40]))),
            ("length", str(rng.choice([0, 8, 32, 2**31, -1]))),
        ):
            e = t.external_data.add()
            e.key, e.value = key, value
    elif kind == 11:
        n = rng.choice(g.node)
        n.input.extend([n.input[0] if n.input else "x"] * rng.choice([1, 3000]))
    elif kind == 12:
        v = rng.choice([*g.input, *g.output])
        v.type.tensor_type.elem_type = rng.choice([0, 9999, T.STRING, T.INT64, T.DOUBLE])
    else:
        g.output.extend([g.output[0]] * rng.choice([1, 2000]))


def gen_onnx(rng: random.Random) -> bytes:
    """A mutated model (module docstring), serialized."""
    if not _SEED_CACHE:
        _SEED_CACHE.extend(_seeds())
    seeds, onnx = _SEED_CACHE
    m = onnx.ModelProto()
    m.CopyFrom(rng.choice(seeds))
    for _ in range(rng.randint(1, 3)):
        _mutate_model(rng, m, onnx)
    data = bytearray(m.SerializeToString())
    if rng.random() < 0.15:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    if rng.random() < 0.03:
        data = data[: rng.randrange(len(data) + 1)]
    return bytes(data)


def npy_bytes(
    header: str, data: bytes = b"", version: int = 1, header_len: int | None = None
) -> bytes:
    """A `.npy` file with `header` as its header dict, as written (the
    declared shape need not match `data`); `header_len` overrides the
    header's declared length."""
    body = header.encode("latin1")
    body += b" " * (-(len(body) + 11) % 64 - (version > 1) * 2) + b"\n"
    n = len(body) if header_len is None else header_len
    size = struct.pack("<H", n & 0xFFFF) if version == 1 else struct.pack("<I", n & 0xFFFFFFFF)
    return b"\x93NUMPY" + bytes([version, 0]) + size + body + data


def _header(rng: random.Random) -> tuple[str, int]:
    descr = rng.choice(
        ["<f2", "<f2", "<f4", "<f8", "|O", "<U3", "|V8", "<c8", "bogus", "[('a', '<f2')]"]
    )
    shape = rng.choice(
        [(65536,), (256, 256), (4,), (), (0,), (2**40,), (-1,), (2**32, 2**32), (65537,), ("a",)]
    )
    fortran = rng.choice(["False", "False", "True", "1"])
    n = 1
    for d in shape:
        n *= d if isinstance(d, int) else 1
    return (
        f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': {shape!r}, }}",
        max(0, min(n, 65536)) * 2,
    )


def _array(rng: random.Random) -> bytes:
    header, nbytes = _header(rng)
    data = b"\0" * rng.choice([nbytes, nbytes // 2, nbytes + 7, 0])
    version = rng.choice([1, 1, 2, 3, 4])
    header_len = rng.choice([None, None, 0, 10, 0xFFFF, 0xFFFFFFFF])
    raw = bytearray(npy_bytes(header, data, version, header_len))
    if rng.random() < 0.2:
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(min(len(raw), 128))] = rng.randrange(256)
    return bytes(raw)


def _loadable_array(rng: random.Random) -> bytes:
    """A `.npy` file numpy wrote of an array near what `A_L2` takes (its
    65,536 f16 elements in several shapes, one element fewer, other element
    types), sometimes with a byte changed or the tail cut: most of these
    load, so the run past the reader is exercised too."""
    import numpy as np

    dtype = rng.choice([np.float16, np.float16, np.float16, np.float32, np.int8, np.uint16])
    shape = rng.choice([(65536,), (256, 256), (64, 1024), (1, 65536), (65535,), (), (4, 4)])
    n = int(np.prod(shape))
    data = np.frombuffer(rng.randbytes(n * np.dtype(dtype).itemsize), dtype).reshape(shape)
    buf = io.BytesIO()
    np.save(buf, data)
    raw = bytearray(buf.getvalue())
    if rng.random() < 0.15:
        raw[rng.randrange(min(len(raw), 128))] = rng.randrange(256)
    if rng.random() < 0.1:
        raw = raw[: rng.randrange(len(raw) + 1)]
    return bytes(raw)


def gen_array(rng: random.Random) -> bytes:
    """A `.npy` file, or a `.npz` archive of one or two (module docstring)."""
    if rng.random() < 0.35:
        return _loadable_array(rng)
    if rng.random() < 0.6:
        return _array(rng)
    buf = io.BytesIO()
    method = rng.choice([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
    with zipfile.ZipFile(buf, "w", method) as z:
        for name in rng.sample(["A_L2.npy", "B_L2.npy", "nope.npy", "A_L2"], rng.randint(1, 2)):
            z.writestr(name, _loadable_array(rng) if rng.random() < 0.5 else _array(rng))
    raw = bytearray(buf.getvalue())
    if rng.random() < 0.3:  # a declared size that lies (local and central headers)
        declared = struct.pack("<I", rng.choice([0, 1, 2**30, 2**32 - 1]))
        raw[22:26] = declared
        at = raw.rfind(b"PK\x01\x02")
        if at >= 0:
            raw[at + 24 : at + 28] = declared
    return bytes(raw)
