"""Device-independent static verification of NEM IR (the `static` class of docs/conformance.md).

Staged like peer NPU legality pipelines: structure and names, then objects
(buffers, regions, decorators, loops), then tasks (operands, attributes,
type families, shapes).  A stage that finds errors stops the pipeline, so a
user sees the root cause rather than its echoes.  Every diagnostic carries
the op's `file:line:col`, the rule id and a fix.

Works on any NEM IR, hand-written or produced by a lowering; the `.nem`
parser resolves names but leaves these rules to this module.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import cast

from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue

from nem.dialect.attributes import (
    DecoratorAttr,
    ResourceAttr,
)
from nem.dialect.decorators import DECORATORS, TARGET_WORDS, allowed_on
from nem.dialect.diagnostics import Diagnostic, SourceLoc
from nem.dialect.expressions import (
    FORWARDING_NAMES,
    SYMBOL_OF,
    BuildFacts,
    Depths,
    Evaluator,
    ExprError,
    expression_depth,
)
from nem.dialect.families import Catalog
from nem.dialect.gc_pause import gc_paused
from nem.dialect.limits import MAX_EXPR_DEPTH, MAX_NESTING_DEPTH
from nem.dialect.operand_binding import user_name
from nem.dialect.ops import (
    WINDOW_FIX,
    BufferOp,
    ComputeOp,
    ConstOp,
    LetOp,
    LoopOp,
    ProgramOp,
    RegionOp,
    StoreOp,
    TaskOp,
    TransferOp,
    WaitOp,
)
from nem.dialect.per_class import first_base_table, subclass_table
from nem.dialect.region_rules import RegionRules
from nem.dialect.semantics.units import RESOURCE_UNITS
from nem.dialect.task_rules import TaskRules

BASELINE_ENTRY_POINT = "nem.baseline_catalog"
"""The entry-point group through which the device package provides the
baseline type families (pyproject.toml): the IR verifies against them
without importing `nem.devices` (docs/design.md "Layout and boundaries")."""


SHIPPED_DEVICES_ENTRY_POINT = "nem.shipped_devices"
"""The entry-point group through which the device package names its shipped
target devices (pyproject.toml), for `ProgramBuilder(device=NAME)`."""


def _provided(group: str) -> tuple[str, object]:
    """What the device package's provider under entry point `group` returns:
    the IR reads device data this way, never by importing `nem.devices`."""
    from importlib.metadata import entry_points

    providers = list(entry_points(group=group))
    if not providers:
        raise RuntimeError(
            f"no '{group}' entry point is installed: the NEM "
            "toolchain's package metadata is missing or stale; reinstall it "
            "(pip install -e .)"
        )
    return providers[0].value, providers[0].load()()


@cache
def baseline_catalog() -> Catalog:
    """The type families of the shipped `nem_baseline_1.0.nem`, from the
    provider installed under the `nem.baseline_catalog` entry point
    (`nem.devices.device_resolver.baseline_catalog`)."""
    where, catalog = _provided(BASELINE_ENTRY_POINT)
    if not isinstance(catalog, Catalog):
        raise RuntimeError(
            f"the '{BASELINE_ENTRY_POINT}' entry point {where} "
            f"returned {type(catalog).__name__}, not a Catalog"
        )
    return catalog


@cache
def shipped_device_names() -> tuple[str, ...]:
    """The shipped target devices (`npm_lite`, ...), each defined by the
    device file of its name, from the provider installed under the
    `nem.shipped_devices` entry point
    (`nem.devices.device_resolver.shipped_device_names`)."""
    names = _provided(SHIPPED_DEVICES_ENTRY_POINT)[1]
    assert isinstance(names, tuple)
    return names


class ProgramVerifier(RegionRules, TaskRules):
    """The static rules, staged: bounds, names, objects (`RegionRules`, loops,
    decorators), tasks (`TaskRules`)."""

    def __init__(
        self, program: ProgramOp, catalog: Catalog | None = None, facts: BuildFacts | None = None
    ):
        self.program = program
        self.catalog = catalog or baseline_catalog()
        self.ev = Evaluator()
        self.diags: list[Diagnostic] = []
        self.facts = facts
        if facts is not None:
            self.ev.seed(facts)

    # -- driver ------------------------------------------------------------
    def run(self, tasks: bool = True) -> list[Diagnostic]:
        """The stages in order, up to the first with an error; without
        `tasks`, the declarations' stages only."""
        facts = self.facts
        # stage 0 reports exactly when a limit is exceeded: the builder's
        # maxima say whether it can (D-BC-SEED)
        within = (
            facts is not None
            and facts.max_loop_depth <= MAX_NESTING_DEPTH
            and facts.max_expr_depth <= MAX_EXPR_DEPTH
        )
        stages = (
            (self.stage_names, self.stage_objects)
            if within
            else (self.stage_bounds, self.stage_names, self.stage_objects)
        )
        for stage in (*stages, self.stage_tasks) if tasks else stages:
            stage()
            if any(d.severity == "error" for d in self.diags):
                break
        return self.diags

    # -- stage 0: bounded work (D-LIMITS) -------------------------------------
    def stage_bounds(self) -> None:
        """Loop nesting and expression depth within the limits every later
        walk relies on (IR from MLIR is not bounded by the `.nem` parser)."""
        depths: Depths = {}
        for op, loops in self.walk():
            if len(loops) > MAX_NESTING_DEPTH:
                return self.err(
                    op,
                    None,
                    f"loops nested more than {MAX_NESTING_DEPTH} deep (limit D-LIMITS)",
                    "flatten the loop nest",
                )
            if type(op) not in SYMBOL_OF and op.name not in FORWARDING_NAMES:
                continue  # not an expression node (most ops): no depth
            d = expression_depth(op, depths)
            if d is not None and d > MAX_EXPR_DEPTH:
                return self.err(
                    op,
                    None,
                    f"integer expression more than {MAX_EXPR_DEPTH} "
                    "operations deep, counting through const and let names "
                    "(limit D-LIMITS)",
                    "compute the value in fewer steps",
                )
        return None

    # -- stage 1: names and structure ----------------------------------------
    def stage_names(self) -> None:
        """NAME-02, CONST-01/06/07, CONST-03/05 on every declaration."""
        scopes: list[dict[str, Operation]] = [{}]
        in_scope = self.facts is not None and self.facts.operands_in_scope

        def declare(name: str, op: Operation, what: str) -> None:
            for scope in scopes:
                first = scope.get(name)
                if first is not None:
                    rule = (
                        "CONST-01"
                        if isinstance(op, ConstOp) and isinstance(first, ConstOp)
                        else (
                            "CONST-07"
                            if isinstance(op, ConstOp) or isinstance(first, ConstOp)
                            else "NAME-02"
                        )
                    )
                    self.err(
                        op,
                        rule,
                        f"'{name}' is already declared at {SourceLoc.of(first)}",
                        f"rename this {what}; names are unique within a program and its loops",
                    )
                    return
            scopes[-1][name] = op

        # (`rec` is passed itself rather than closing over its own name: a
        # recursive closure is a reference cycle that would keep the
        # verifier, its memos and every object they hold, alive until the
        # cyclic collector's next pass, which then traverses them all)
        def rec(rec: Callable[..., None], block: Block, in_loop: bool) -> None:
            for op in block.ops:
                t = type(op)  # `type(op) is`: ops are ABCs, their isinstance is slow
                if t is ConstOp:
                    if in_loop:
                        self.err(
                            op,
                            "CONST-06",
                            f"const '{op.const_name.data}' is declared inside a loop",
                            "move the const declaration before the loop",
                        )
                    self._check_const_expr(op)
                    declare(op.const_name.data, op, "const")
                elif t is LetOp or t is BufferOp:
                    name = op.properties["name"]
                    assert isinstance(name, StringAttr)
                    declare(name.data, op, "declaration")
                elif t is RegionOp and op.region_name is not None:
                    declare(op.region_name.data, op, "region")
                elif _IS_TASK[t] and (token := op.token_name()) is not None:
                    declare(token, op, "token")
                elif t is LoopOp:
                    scopes.append({})
                    declare(op.iv_name.data, op, "loop variable")
                    rec(rec, op.block, True)
                    scopes.pop()
                if in_scope:  # by construction (D-BC-SEED)
                    continue
                for v in op.operands:
                    # defined in this very block (most operands): nothing to walk
                    # (`op`, the field `owner` reads, for the commonest kind)
                    vt = type(v)
                    owner = (
                        v.op.parent
                        if vt is OpResult
                        else v.block
                        if vt is BlockArgument
                        else v.owner.parent
                    )
                    if owner is not block:
                        self._check_defined(op, v, block)

        rec(rec, self.program.block, False)

    def _check_const_expr(self, op: ConstOp) -> None:
        bad = _non_const_leaf(op.value)
        if bad is not None:
            self.err(
                op,
                "CONST-03",
                f"const '{op.const_name.data}' depends on {bad}",
                "a const expression uses only literals, earlier consts, + - * / mod",
            )
            return
        try:
            self.ev.static(op.value)
        except ExprError as e:
            self.err(op, "CONST-05", f"{e} in const '{op.const_name.data}'", "change the divisor")

    def _check_defined(self, user: Operation, value: SSAValue, block: Block | None) -> None:
        """TASK-03 / NAME-01 for IR not built by the parser: every operand's
        definition precedes its use in the same or an enclosing block (`block`,
        the user's)."""
        owner_block = value.block if type(value) is BlockArgument else value.owner.parent_block()
        while block is not None and block is not owner_block:
            parent = block.parent_op()
            block = parent.parent_block() if parent is not None else None
        if block is None:
            rule = (
                "TASK-03"
                if isinstance(value.type, type(None))
                or user.name in ("nem.wait",)
                or value.type.name == "nem.token"
                else "NAME-01"
            )
            loop = owner_block.parent_op() if owner_block is not None else None
            named = user_name(value) or f"a value computed by {value.owner.name}"  # type: ignore[union-attr]
            if isinstance(value, BlockArgument) and isinstance(loop, LoopOp):
                what = f"loop variable '{loop.iv_name.data}' is used outside its loop"
            elif isinstance(loop, LoopOp):
                what = (
                    f"{named} is defined in the body of loop "
                    f"'{loop.iv_name.data}' and used outside it"
                )
            else:
                what = f"{named} is defined in a scope that does not enclose its use"
            self.err(
                user,
                rule,
                f"{what} (D-NAME-SCOPE)",
                "tokens and names of a loop body are visible only inside that body: use "
                "them there, or define them before the loop",
            )

    # -- stage 2: objects ------------------------------------------------------
    def stage_objects(self) -> None:
        for op, loops in self.walk():
            t = type(op)
            if t is BufferOp:
                self._buffer(cast(BufferOp, op))
            elif t is RegionOp:
                self._region(cast(RegionOp, op), loops)
            elif t is LoopOp:
                self._loop(cast(LoopOp, op))
            props = op.properties
            # most ops have no decorators: nothing to read
            if "decorators" in props or "operand_decorators" in props:
                self._decorators(op)

    def _loop(self, op: LoopOp) -> None:
        lo, hi = self.ev.static(op.lower), self.ev.static(op.upper)
        if lo is not None and hi is not None and lo > hi:
            self.err(
                op,
                "LOOP-04",
                f"loop '{op.iv_name.data}' runs from {lo} to {hi}",
                "bounds are inclusive and need start <= end",
            )
        msg = op.window_error()
        if msg is not None:
            self.err(op, "LOOP-03", msg, WINDOW_FIX)

    def _decorators(self, op: Operation) -> None:
        target = _TARGET_OF[type(op)]
        if target is None:
            return
        decos = list(op.decorator_list()) if hasattr(op, "decorator_list") else []
        for d in decos:
            self._decorator(op, d, target)
        # operand decorators only when the task has them (`operand_decos` is
        # empty otherwise): reading every task's operands cost more than the rule
        if _IS_TASK[type(op)] and isinstance(op.properties.get("operand_decorators"), ArrayAttr):
            task = cast(TaskOp, op)
            for i in range(len(task.written_operands())):
                for d in task.operand_decos(i):
                    self._decorator(op, d, "region")

    def _decorator(self, op: Operation, d: DecoratorAttr, target: str) -> None:
        info = DECORATORS[d.DECO_NAME]
        if isinstance(d, ResourceAttr) and d.unit.data not in RESOURCE_UNITS:
            self.err(
                op,
                "RES-01",
                f"@resource({d.unit.data}[{d.index.data}]): {d.unit.data} is not "
                "a valid execution target",
                "valid @resource units are " + ", ".join(RESOURCE_UNITS),
            )
        elif target not in info.targets:
            self.err(
                op,
                "DECO-02",
                f"{info.usage.split('(')[0]} does not apply to {TARGET_WORDS[target]}",
                f"{TARGET_WORDS[target]} takes " + (", ".join(allowed_on(target)) or "none"),
            )

    # -- stage 3: tasks ----------------------------------------------------
    def stage_tasks(self) -> None:
        for op, loops in self.walk():
            t = type(op)
            if t is TransferOp or t is StoreOp:
                self._move(cast(TransferOp | StoreOp, op), loops)
            elif _IS_COMPUTE[t]:
                self._compute(cast(ComputeOp, op))
                self._compute_aliasing(cast(ComputeOp, op), loops)
            if _IS_TASK[t]:
                self._task_operand_rules(cast(TaskOp, op))


_TARGETS = (
    (RegionOp, "region"),
    (BufferOp, "buffer"),
    (LoopOp, "loop"),
    (TransferOp, "transfer"),
    (StoreOp, "store"),
    (ComputeOp, "compute"),
    (WaitOp, "wait"),
)
"""The decorator target kind of each op (decorators.py speaks in these words)."""


_TARGET_OF = first_base_table(_TARGETS, None)
"""An op class's decorator target kind, None for an op that takes no decorators."""
_IS_TASK = subclass_table(TaskOp)
_IS_COMPUTE = subclass_table(ComputeOp)


def _non_const_leaf(value: SSAValue) -> str | None:
    """What, other than literals and consts, a const expression uses."""
    if isinstance(value, BlockArgument):
        return "a loop variable"
    op = value.owner
    assert isinstance(op, Operation)
    if isinstance(op, ConstOp):
        return None
    if op.name == "arith.constant":
        return None
    if op.name in ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.remsi"):
        return _non_const_leaf(op.operands[0]) or _non_const_leaf(op.operands[1])
    if isinstance(op, LetOp):
        return f"let '{op.let_name.data}'"
    return f"'{op.name}'"


def verify_declarations(program: ProgramOp) -> list[Diagnostic]:
    """The static rules on `program`'s declarations (limits, names, buffers,
    regions, loops, decorators), not on its tasks: what holds before a pass
    orders the tasks (`nem-check-lowered{declarations-only=true}`)."""
    return ProgramVerifier(program).run(tasks=False)


def verify_program(
    program: ProgramOp, catalog: Catalog | None = None, facts: BuildFacts | None = None
) -> list[Diagnostic]:
    """All device-independent static diagnostics of `program`.

    `facts` are what the front end that just built `program` computed of its
    expressions (the bytecode reader's `LoadedBytecode.facts`): the rules
    take them instead of walking the expressions again, with the same
    diagnostics (D-BC-SEED).  Only for the IR exactly as that front end built it.

    The cyclic garbage collector is paused meanwhile, as in `parse_nem` and
    `read_nemb`: IR that was just built with it paused is all in the young
    generation, and the collections the verifier's allocations would
    trigger traverse all of it (the verifier itself makes no garbage
    cycles worth collecting early); this made verifying freshly loaded IR
    take ~1.7x as long."""
    from nem.dialect.arguments import check_type

    check_type(
        "verify_program",
        "program",
        program,
        ProgramOp,
        "a nem ProgramOp (parse_nem(text).ops.first)",
    )
    with gc_paused():
        return ProgramVerifier(program, catalog, facts).run()
