"""The `bufferize` stage's upstream passes (`pipeline.BUFFERIZE`, then
canonicalize and cse), with the function arguments that are only read
given to them as buffers (D-COMPILE-BUFFERIZE-ARGS).

Upstream `one-shot-bufferize` (MLIR 22) analyses every tensor operand; for
one it looks at every use of every alias of the operand's value
(`wouldCreateWriteToNonWritableBuffer`, `wouldCreateReadAfterWriteInterference`).
A value with U uses therefore costs U^2: a weight that a chain of 5,000
Add/Mul nodes all read (bench_compile_scale's chains) took 61 s of a
10,000-node compile, 67 s CPU of `mlir-opt` (2.6 s at 3,000 nodes).  A
function argument whose every use is an input operand of a linalg op (read,
never written, aliasing no result) is bufferized to a buffer argument
reading its memref anyway; here it becomes that `memref` argument before
the passes run, each use reading it through its own
`bufferization.to_tensor ... restrict`, whose value has one use.  Same
output: the function's argument is the memref of the identity layout
`function-boundary-type-conversion=identity-layout-map` gives, and each
`to_tensor` folds into the memref it reads.  (`restrict` promises no other
tensor reads the memref; several do here, all of them only reading: the
promise matters for in-place writes, and there are none.)
"""

from __future__ import annotations

from typing import Any

from nem.compile.options import CompileOptions

BUFFERIZE = (
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{modify-public-functions hoist-static-allocs}"
)
"""The bufferization of the `bufferize` stage (and of the reference path)."""


def run(module: Any, options: CompileOptions | None = None) -> None:
    """The upstream bufferization of `module` (an `mlir.ir.Module`), in
    place, as `options` (default: `CompileOptions()`'s) say: with
    `concat_in_place`, each concatenation's inputs computed into its buffer
    (D-COMPILE-CONCAT-IN-PLACE), with `pad_in_place`, each padded tensor's
    source computed into the padded buffer (D-COMPILE-PAD-IN-PLACE):
    concatenations first, so that a padded one's inputs are computed into
    the padded buffer; with `transposed_reads`, a transposed graph input
    read through a strided view (D-COMPILE-LAYOUT,
    `nem.compile.transposed_reads`), after the passes, on buffers."""
    from mlir.passmanager import PassManager

    from nem.compile import concats, pads, transposed_reads

    options = options or CompileOptions()

    read_only_args_as_buffers(module)
    copy_repeated_results(module)
    written = options.concat_in_place and concats.write_in_place(module)
    padded = options.pad_in_place and pads.write_in_place(module)
    PassManager.parse(f"builtin.module({BUFFERIZE},canonicalize,cse)").run(module.operation)
    if written or padded:
        pads.drop_self_copies(module)
    if options.transposed_reads:
        transposed_reads.read_through_views(module)


def copy_repeated_results(module: Any) -> int:
    """A function that returns one value in two results returns a copy of
    it in the later ones (`linalg.copy` into a `tensor.empty`): upstream
    `buffer-results-to-out-params` (MLIR 22) crashed the process on
    `return %s, %s` (a segmentation fault in `updateReturnOps`, no message:
    an outside user, session 66).  Returns how many copies."""
    from mlir import ir
    from mlir.dialects import linalg, tensor

    copies = 0
    for fn in module.body.operations:
        if fn.operation.name != "func.func" or not fn.regions[0].blocks:
            continue
        ret = list(fn.regions[0].blocks[0].operations)[-1].operation
        seen: list[Any] = []
        for k, v in enumerate(list(ret.operands)):
            if isinstance(v.type, ir.RankedTensorType) and any(v == w for w in seen):
                with ir.InsertionPoint(ret), ret.location:
                    t = ir.RankedTensorType(v.type)
                    empty = tensor.empty(t.shape, t.element_type)
                    copy = linalg.copy(v, outs=[empty]).owner
                    if "cast" in copy.attributes:  # (its default; xDSL 0.74 parses no type_fn)
                        del copy.attributes["cast"]
                    ret.operands[k] = copy.results[0]
                copies += 1
            seen.append(v)
    return copies


def _only_read(arg: Any) -> bool:
    """Every use of `arg` is an input operand of a linalg op (destination
    style: inputs first, as `operandSegmentSizes` counts them)."""
    from mlir import ir

    uses = list(arg.uses)
    if len(uses) < 2:  # one use costs nothing: left as it is
        return False
    for use in uses:
        owner = use.owner
        if not owner.name.startswith("linalg.") or "operandSegmentSizes" not in owner.attributes:
            return False
        sizes = ir.DenseI32ArrayAttr(owner.attributes["operandSegmentSizes"])
        if use.operand_number >= sizes[0]:
            return False
    return True


def read_only_args_as_buffers(module: Any) -> int:
    """Each tensor argument of a `func.func` of `module` that several linalg
    ops only read becomes a `memref` argument (identity layout, default
    memory space), each use reading it through its own
    `bufferization.to_tensor %arg restrict` placed before the use.  Returns
    how many arguments changed."""
    from mlir import ir

    with module.context, ir.Location.unknown():  # types and attributes built here
        return _as_buffers(module, ir)


def _as_buffers(module: Any, ir: Any) -> int:  # ir: the mlir.ir module
    changed = 0
    for op in module.body.operations:
        fn = op.operation
        if fn.name != "func.func" or not fn.regions[0].blocks:
            continue
        block = fn.regions[0].blocks[0]
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        inputs = list(ftype.inputs)
        before = changed
        for k, arg in enumerate(block.arguments):
            if not isinstance(arg.type, ir.RankedTensorType) or not _only_read(arg):
                continue
            tensor = ir.RankedTensorType(arg.type)
            if tensor.encoding is not None:
                continue
            memref = ir.MemRefType.get(tensor.shape, tensor.element_type)
            uses = [(u.owner, u.operand_number) for u in arg.uses]
            arg.set_type(memref)
            for owner, number in uses:
                with ir.InsertionPoint(owner), owner.location:
                    read = ir.Operation.create(
                        "bufferization.to_tensor",
                        results=[tensor],
                        operands=[arg],
                        attributes={"restrict": ir.UnitAttr.get()},
                    )
                owner.operands[number] = read.result
            inputs[k] = memref
            changed += 1
        if changed > before:
            fn.attributes["function_type"] = ir.TypeAttr.get(
                ir.FunctionType.get(inputs, list(ftype.results))
            )
    return changed
