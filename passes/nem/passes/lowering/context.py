"""The state of one lowering run, passed explicitly to every handler.

`LoweringContext` holds what the conversion of one function learns and
decides as it walks the ops: the NEM view of every memref value, the affine
value of every index value, the names in use, the program-scope
declarations (buffers are hoisted), the scopes of the partial-tile checks,
the summary of what was raised, and the target device.  Nothing of it lives
at module level, so two lowerings (threads, nested pipelines) never share
state.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xdsl.dialects import affine
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from nem.dialect.attributes import mem_level_error
from nem.dialect.builder import Loc, NemBuilder
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError
from nem.dialect.ops import LoopOp
from nem.dialect.reserved_words import RESERVED
from nem.passes.lowering.affine_algebra import Aff, Var, eval_map
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.legality import TaskLegality
from nem.passes.lowering.memref_roots import only_dma_tags
from nem.passes.lowering.partial_tiles import PeelScope, RegionAccess
from nem.passes.lowering.views import View

if TYPE_CHECKING:
    from xdsl.ir.affine import AffineMap

    from nem.dialect.device_model import Device
    from nem.dialect.families import Catalog
    from nem.passes.lowering.memref_roots import MemrefRoots


@dataclass
class Band:
    """The scratch of a split convolution being lowered (D-COMPILE-NMU-SPLIT),
    shaped as its whole output, and the rows of it whose `add` into the
    output is still to come (`compute._accumulator`)."""

    view: View
    pending: tuple[int, int]


@dataclass(frozen=True)
class Options:
    """The options of `convert-affine-to-nem` (and `lower-to-nem`)."""

    spaces: dict[int, str]
    """Memref memory space -> NEM level (`memory-spaces`, D-LOW-OPT-SPACES)."""
    device: str | None = None
    entry: str | None = None
    include_dirs: tuple[str, ...] = ()
    remarks: bool = False
    """Report the summary remark (what was raised, what fell back)."""
    weights: str | None = None
    """Where the initial contents of globals go (`weights=FILE.npz`, D-LOW-GLOBAL)."""
    pipeline_tiles: bool = False
    """Run two iterations of a tile loop that allocates its L1 buffers in its
    body at once, the buffers in two slots (`pipeline-tiles`, D-LOW-PIPE-BODY)."""


@dataclass(frozen=True)
class Fallback:
    """A computation that runs as an escape-hatch task (D-LOW-ESCAPE)."""

    op: Operation
    what: str
    """"WHAT at LINE:COL"."""
    why: str


@dataclass
class Summary:
    """What the remarks of `remarks=true` report (D-OPT-REMARKS)."""

    raised: list[str] = field(default_factory=list)
    """"WHAT at LINE:COL -> OPCODES" per raised op."""
    fallback: list[Fallback] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    slotted: list[str] = field(default_factory=list)
    """Buffers hoisted out of pipelined loops in two slots (D-LOW-PIPE, D-LOW-PIPE-BODY)."""


class Names:
    """Names of buffers, loop variables and tokens: an MLIR name hint when
    it is a free NEM identifier, else `DEFAULT<n>`."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self._buffers = 0
        self._tokens = 0
        self._scratch = 0
        self._scratch_made: list[tuple[str, int]] = []
        """The scratch names handed out, each with the counter before it:
        the newest can be given back (`release_scratch`)."""
        self._suffix: dict[str, int] = {}
        """Per hint, the next `_v<k>` to try (a hint used N times would
        otherwise probe N names: quadratic in a large program)."""

    @classmethod
    def resumed(cls, declared: Iterable[str], defaults: int) -> Names:
        """The generator as `nem-declare-buffers` left it, from what it wrote
        into the IR: the names it gave (taken) and its count of `DEFAULT<n>`
        names (`defaults`), so the conversion's names are the ones one
        generator would give after those (D-LOW-DECLARE)."""
        names = cls()
        names.used.update(declared)
        names._buffers = defaults
        return names

    @property
    def defaults(self) -> int:
        """The count `resumed` takes back: where `DEFAULT<n>` names go on."""
        return self._buffers

    def fresh(self, hint: str | None, default: str) -> str:
        base = hint if hint and hint.isidentifier() and hint not in RESERVED else None
        if base is None:
            name, self._buffers = self._numbered(default, self._buffers)
            return name
        name, k = base, self._suffix.get(base, 1)
        while name in self.used:
            name, k = f"{base}_v{k}", k + 1
        self._suffix[base] = k
        self.used.add(name)
        return name

    def scratch(self, default: str) -> str:
        """`DEFAULT<n>` for a scratch buffer, numbered apart from the other
        names: a plan that falls back gives its scratch names back
        (`release_scratch`), so the numbers of those kept do not depend on
        the plans tried before (D-LOW-OUTLINE)."""
        before = self._scratch
        name, self._scratch = self._numbered(default, before)
        self._scratch_made.append((name, before))
        return name

    def release_scratch(self, names: set[str]) -> None:
        """Give back the scratch names of `names` made last, newest first, as
        if they had never been made.  One made before a kept one stays
        taken (renumbering the kept one would rename a printed buffer)."""
        while self._scratch_made and self._scratch_made[-1][0] in names:
            name, self._scratch = self._scratch_made.pop()
            self.used.discard(name)

    def _numbered(self, default: str, n: int) -> tuple[str, int]:
        """The first free `DEFAULT<k>` with k >= n, and k + 1."""
        while f"{default}{n}" in self.used:
            n += 1
        name = f"{default}{n}"
        self.used.add(name)
        return name, n + 1

    def token(self, kind: str) -> str:
        """`KIND<n>` (`dma1`, `add2`, ...), numbered across kinds."""
        self._tokens += 1
        while f"{kind}{self._tokens}" in self.used:
            self._tokens += 1
        name = f"{kind}{self._tokens}"
        self.used.add(name)
        return name


DEFAULT_SPACES = "0:DDR,1:L2,2:L1"


def parse_spaces(text: str | tuple[str, ...]) -> dict[int, str]:
    """The `memory-spaces` option: `SPACE:LEVEL` (or `SPACE-LEVEL`) items
    separated by commas, e.g. `0:DDR,1:L2,2:L1[0]`; one string or xDSL's tuple
    of items.  `nem-opt` accepts the `:` form unquoted in a pass's `{...}`
    (it quotes the value before xDSL parses the pipeline, D-LOW-OPT-SPACES).  A bad
    item (space not an integer, unknown level, space mapped twice) is a
    one-line error naming the option and the item."""
    if not isinstance(text, str):
        text = ",".join(text)

    def bad(why: str) -> NemDiagnosticError:
        return NemDiagnosticError([Diagnostic("error", f"bad memory-spaces {why}")])

    items = [p.strip() for p in text.split(",")]
    if items == [""]:
        raise bad("value: empty (write memory-spaces=0:DDR,1:L2,2:L1)")
    out: dict[int, str] = {}
    for item in items:
        sep = ":" if ":" in item else "-"
        k, found, lvl = (s.strip() for s in item.partition(sep))
        if not found:
            raise bad(f"item '{item}': expected SPACE:LEVEL, e.g. 1:L2")
        if not (k.isascii() and k.isdigit()):
            raise bad(f"item '{item}': memory space '{k}' is not a non-negative integer")
        why = mem_level_error(lvl)
        if why is not None:
            raise bad(f"item '{item}': {why}")
        if int(k) in out:
            raise bad(f"item '{item}': memory space {int(k)} is already mapped to {out[int(k)]}")
        out[int(k)] = lvl
    return out


def space_level(op: Operation | None, t: MemRefType, spaces: dict[int, str]) -> str:
    """The level `spaces` (`memory-spaces`) maps a memref type's memory
    space to, `L1` unnumbered (`LoweringContext.level` numbers it); else
    rejected at `op`."""
    ms = t.memory_space
    if isinstance(ms, IntegerAttr):
        k = ms.value.data
    elif ms is None or ms.name == "builtin.none" or type(ms).__name__ == "NoneAttr":
        k = 0
    else:
        raise reject(
            op,
            f"memory space {ms} is not an integer",
            "use integer memory spaces and memory-spaces=0:DDR,1:L2,2:L1",
        )
    if k not in spaces:
        raise reject(
            op,
            f"memory space {k} is not mapped to a NEM level",
            f"add {k}:LEVEL to the memory-spaces option",
        )
    return spaces[k]


def pipelined_loop(at: Block) -> LoopOp | None:
    """The innermost pipelined NEM loop holding NEM block `at` (re-rolled,
    D-LOW-PIPE, or a tile loop, D-LOW-PIPE-BODY): the conversion gives such
    a loop, and no other, a window (`@max_in_flight`, at least 2), and the
    buffers its body declares that many slots.  Read from the IR, where no
    stack of the run need follow the walk: a peeled last tile is lowered
    after its loop, outside it; and not from the values the conversion
    bound, as a loop of one iteration's variable is 0, like the peeled
    tile's index (D-LOW-WALK)."""
    parent = at.parent_op()
    while parent is not None:
        if isinstance(parent, LoopOp) and parent.max_in_flight() > 1:
            return parent
        parent = parent.parent_op()
    return None


class LoweringContext:
    """Everything one `convert-affine-to-nem` run knows (see the module doc)."""

    def __init__(
        self,
        options: Options,
        catalog: Catalog,
        device: Device | None,
        roots: MemrefRoots,
        names: Names,
    ) -> None:
        self.options = options
        self.device = device
        self.names = names
        """The generator `nem-declare-buffers` started (`Names.resumed`)."""
        self.summary = Summary()
        self.views: dict[SSAValue, View] = {}
        self.roots = roots
        """Which buffer each memref value is, from the MLIR (D-LOW-OUTLINE)."""
        self.env: dict[SSAValue, Aff] = {}
        """Affine value of each index value lowered so far."""
        self.decl_block = Block()
        """Program-scope declarations (hoisted buffers), moved to the top at the end."""
        self.decls = NemBuilder.at_end(self.decl_block)
        self.scopes: list[PeelScope] = []
        """Scopes of the partial-tile checks, outermost (the function) first."""
        self.legality = TaskLegality(catalog, device, options.device)
        """Whether a task has a variant on the target (`staging.illegal`, D-LOW-OUTLINE)."""
        self.scratch: dict[tuple[object, ...], View] = {}
        self.bands: dict[tuple[object, ...], Band] = {}
        """The scratch of the split convolution whose bands are being lowered
        (`compute._accumulator`, D-COMPILE-NMU-SPLIT), per level, shape, element
        type and execute; not cleared per top-level statement, as `scratch` is."""
        self._var_order = itertools.count()

    # -- names and variables ------------------------------------------------------
    def new_var(self, arg: BlockArgument | None, name: str, trip: int) -> Var:
        """A NEM loop variable; variables made earlier print first."""
        return Var(arg, name, trip, next(self._var_order))

    # -- slots of pipelined loops ------------------------------------------------------
    def slots(self, at: Block) -> int:
        """The slots of a buffer declared for NEM block `at`: the window of
        the innermost pipelined loop holding it (`pipelined_loop`), else 1."""
        loop = pipelined_loop(at)
        return 1 if loop is None else loop.max_in_flight()

    def slot_base(self, at: Block, op: Operation, n_el: int) -> Aff:
        """Where this iteration's slot of a buffer of `n_el` elements,
        declared for `op` lowered into NEM block `at`, starts:
        `(v mod slots) * n_el` for the variable `v` of the innermost
        pipelined loop holding `at`, else 0."""
        loop = pipelined_loop(at)
        if loop is None:
            return Aff.c(0)
        return self.loop_variable(loop, op).mod(loop.max_in_flight()).scale(n_el)

    def loop_variable(self, loop: LoopOp, op: Operation) -> Aff:
        """The variable of NEM loop `loop`, in which `op` is being lowered:
        the atom the conversion bound the variable of an MLIR loop holding
        `op` with (`lower_loop` binds `lb + v * step`), else 0 (a loop of
        one iteration, whose variable `Aff.atom` makes 0 and no value holds)."""
        arg = loop.body.block.args[0]
        parent = op.parent_op()
        while parent is not None:
            if isinstance(parent, affine.ForOp) and (
                (value := self.env.get(parent.body.block.args[0])) is not None
            ):
                for atom, _ in value.terms.values():
                    if isinstance(atom, Var) and atom.arg is arg:
                        return Aff.atom(atom)
            parent = parent.parent_op()
        return Aff.c(0)

    # -- index values ---------------------------------------------------------------
    def index(self, v: SSAValue, user: Operation) -> Aff:
        """The affine value of index operand `v` of `user`."""
        a = self.env.get(v)
        if a is None:
            if isinstance(v.type, IndexType):
                raise reject(
                    user,
                    f"index operand {v.name_hint or ''} is not an affine "
                    "function of loop indices and constants",
                )
            raise reject(user, "expected an index operand")
        return a

    def affine(self, op: Operation, m: AffineMap, operands: tuple[SSAValue, ...]) -> list[Aff]:
        """The results of affine map `m` of `op` on its operands."""
        vals = [self.index(v, op) for v in operands]
        try:
            return eval_map(m, vals)
        except ValueError as e:
            raise reject(op, f"non-affine index: {e}") from None

    # -- memref views -----------------------------------------------------------------
    def view(self, v: SSAValue, user: Operation) -> View:
        """The NEM view of memref operand `v` of `user`."""
        vw = self.views.get(v)
        if vw is None:
            if only_dma_tags(v):
                raise reject(user, "a DMA tag memref is used as data")
            raise reject(
                user,
                "memref operand does not come from a function argument, "
                "memref.alloc or memref.subview",
            )
        return vw

    def level(self, op: Operation | None, t: MemRefType) -> str:
        """The NEM level of a memref type's memory space (`memory-spaces`)."""
        level = space_level(op, t, self.options.spaces)
        if level == "L1" and self.device is not None and self.device.topology.num_engines > 1:
            return "L1[0]"  # written out, so nem-verify has no choice to warn of (D-LOW-L1)
        return level

    # -- declarations -----------------------------------------------------------------
    def declare_buffer(self, name: str, level: str, size: int, loc: Loc) -> SSAValue:
        """A buffer at program scope (D-LOW-BUF)."""
        return self.decls.buffer(name, level, size, align=64, loc=loc)

    def is_declared(self, buffer: SSAValue) -> bool:
        owner = buffer.owner
        return isinstance(owner, Operation) and owner.parent_block() is self.decl_block

    def drop_if_unused(self, buffer: SSAValue) -> bool:
        """Erase the declaration of `buffer` (and its size constant, once unused)
        when no statement uses it: an unused buffer has no lifetime, so
        nem-share-buffers could not share its bytes (D-LOW-BUF).  Whether it did."""
        op = buffer.owner
        if buffer.uses or not self.is_declared(buffer):
            return False
        assert isinstance(op, Operation)
        size = op.operands[0].owner if op.operands else None
        op.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
        op.erase()
        if (
            isinstance(size, Operation)
            and not size.results[0].uses
            and size.parent_block() is self.decl_block
        ):
            size.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
            size.erase()
        return True

    # -- partial-tile scopes ------------------------------------------------------------
    @property
    def scope(self) -> PeelScope:
        """The innermost scope of the narrowing checks."""
        return self.scopes[-1]

    @property
    def peeled(self) -> bool:
        """Inside a peeled partial tile (the function scope aside)."""
        return len(self.scopes) > 1

    @contextmanager
    def in_scope(self, scope: PeelScope) -> Iterator[PeelScope]:
        self.scopes.append(scope)
        try:
            yield scope
        finally:
            self.scopes.pop()

    def log_region(self, access: RegionAccess) -> None:
        """Record a region for the exactness checks of every enclosing scope."""
        for scope in self.scopes:
            scope.log.append(access)
