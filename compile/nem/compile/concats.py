"""Concatenations written in place (D-COMPILE-CONCAT-IN-PLACE), before bufferization.

The ONNX importer makes a Concat a chain of `tensor.insert_slice`s of its
inputs into one `tensor.empty` (`emit.concat`); upstream one-shot
bufferization then computes each input into a buffer of its own and copies
it into its slice of the concatenation's buffer: on SqueezeNet the eight
fire modules' concatenations were 97,024 of its 312,809 timed cycles, copies
from DDR to DDR on the sDMAs that nothing overlapped.

Here the `tensor.empty` the chain of ops computing each input starts from
(`pads.producer_root`) becomes a `tensor.extract_slice` of the
concatenation at that input's slice, so the op computing the input writes
the concatenation's buffer directly where One-Shot Analysis finds that safe
(the insert then bufferizes to a copy of a view onto itself, erased by
`pads.drop_self_copies`); otherwise the insert is the copy it was.  Valid
whatever the analysis decides: a `tensor.empty` has no defined content, so
any tensor of its type may replace it.

The slice is taken of the tensor the input is inserted into (the
concatenation so far), not of the `tensor.empty` itself: an input written
into the empty tensor's buffer before an earlier insert reads that tensor
(an insert reads its destination) is a conflict to the analysis, which then
copies.  So the inserts are first put in the order their inputs are
computed, each moved just after its input (inserts of disjoint slices
commute: the same tensor at the end), and an input whose producer chain
starts before the insert it follows keeps its copy.

A concatenation that is padded (a `tensor.pad` reads it: Inception's
blocks, whose next block pools its input with padding 1) is rewritten
alike, before `pads.write_in_place`, which replaces every use of the
`tensor.empty` a padded tensor's source starts from: the concatenation is
computed into the padded buffer's interior (D-COMPILE-PAD-IN-PLACE) and
each input into its slice of it.  Until session 24 it was left out: its
inputs' Relus, writing slices of the interior (views of a view), were not
fused into their convolutions (D-COMPILE-FUSE-L1 took the interior of a
padded buffer only, `slices.written_apart`), and Inception v1 ran 3.4% slower.
"""

from __future__ import annotations

from typing import Any

from nem.compile.pads import entry_blocks, producer_root, static
from nem.compile.slices import overlap, span


def write_in_place(module: Any) -> int:
    """Rewrite each concatenation (a chain of two or more static
    `tensor.insert_slice`s of disjoint slices into a `tensor.empty`) in the
    entry block of a `func.func` of `module` (an `mlir.ir.Module`) as the
    module docstring says.  Returns how many inputs were made to write in
    place."""
    from mlir import ir

    done = 0
    with module.context:
        for block in entry_blocks(module):
            empties = [o.operation for o in block.operations if o.operation.name == "tensor.empty"]
            for empty in empties:
                chain = _chain(empty)
                if len(chain) > 1 and _disjoint(chain, ir):
                    done += _rewrite(empty, chain, block, ir)
    return done


def _chain(empty: Any) -> list[Any]:
    """The inserts of a concatenation into `empty`, in order: each the only
    user of the tensor before it, as its destination, in the same block."""
    chain: list[Any] = []
    value = empty.results[0]
    while True:
        uses = list(value.uses)
        if len(uses) != 1 or uses[0].operand_number != 1:
            return chain
        op = uses[0].owner
        op = getattr(op, "operation", op)
        if op.name != "tensor.insert_slice" or len(op.operands) != 2 or op.block != empty.block:
            return chain  # (more operands: dynamic offsets, sizes or strides)
        chain.append(op)
        value = op.results[0]


def _box(op: Any, ir: Any) -> tuple[list[int], list[int]]:
    return static(op.attributes["static_offsets"], ir), static(op.attributes["static_sizes"], ir)


def _disjoint(chain: list[Any], ir: Any) -> bool:
    """Unit strides and pairwise disjoint slices (so the inserts commute)."""
    if any(set(static(op.attributes["static_strides"], ir)) != {1} for op in chain):
        return False
    boxes = [span(op) for op in chain]
    return not any(overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def _defining(value: Any, ir: Any) -> Any:
    """The op defining `value` (None: a block argument)."""
    owner = value.owner
    return None if isinstance(owner, ir.Block) else getattr(owner, "operation", owner)


def _in_order(chain: list[Any], ir: Any) -> list[Any]:
    """The inserts by the position of their input's definition (block
    arguments first), ties in chain order: an insertion sort on
    `is_before_in_block` (a concatenation has a handful of inputs)."""
    ranked: list[Any] = []
    for op in chain:
        mine = _defining(op.operands[0], ir)
        at = len(ranked)
        while at > 0 and mine is not None:
            theirs = _defining(ranked[at - 1].operands[0], ir)
            if theirs is None or theirs == mine or theirs.is_before_in_block(mine):
                break
            at -= 1
        ranked.insert(at, op)
    return ranked


def _rewrite(empty: Any, chain: list[Any], block: Any, ir: Any) -> int:
    users = [(use.owner, use.operand_number) for use in chain[-1].results[0].uses]
    empty.move_before(block.operations[0])  # (it dominates every input)
    acc, prev = empty.results[0], empty
    ranked = _in_order(chain, ir)
    for op in ranked:  # each insert just after its input and the insert before
        mine = _defining(op.operands[0], ir)
        op.move_after(prev if mine is None or mine.is_before_in_block(prev) else mine)
        op.operands[1] = acc
        acc, prev = op.results[0], op
    for user, number in users:
        user.operands[number] = acc
    done = 0
    into = empty.results[0]
    for op in ranked:
        done += _compute_into(op, into, ir)
        into = op.results[0]
    return done


def _compute_into(op: Any, into: Any, ir: Any) -> int:
    """Make the chain computing the input of the insert `op` start from
    `into`'s slice at `op`'s box (an extract_slice just after `into`'s
    definition) instead of its `tensor.empty`: at the root of that chain and
    at every other use of the empty after the slice (an inner concatenation's
    inputs, DenseNet's: the concatenations of a dense block nest in one
    buffer).  Returns 1 if done, 0 where the chain starts before `into`."""
    from mlir.dialects import tensor

    source = op.operands[0]
    root = producer_root(source, ir)
    if root is None:
        return 0
    user, number = root
    at = _defining(into, ir)
    if user.block != at.block or not at.is_before_in_block(user):
        return 0
    old = user.operands[number].owner
    offsets, sizes = _box(op, ir)
    with ir.InsertionPoint.after(at), user.location:
        ones = [1] * len(sizes)
        view = tensor.extract_slice(source.type, into, [], [], [], offsets, sizes, ones)
    for use in list(old.results[0].uses):
        owner = getattr(use.owner, "operation", use.owner)
        if owner.block == at.block and view.owner.operation.is_before_in_block(owner):
            owner.operands[use.operand_number] = view
    if not list(old.results[0].uses):
        old.erase()
    return 1
