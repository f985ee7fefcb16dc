"""Preparing an ONNX model for the importer (D-COMPILE-SIMPLIFY).

Models as people ship them are not in the form a converter per op wants:
exporters of opsets 6-9 write attributes that later opsets made inputs,
and weights, shapes and whole subgraphs are often computed by nodes
(`ConstantOfShape` building the weights of the nine CNNs in
`onnx/backend/test/data/light`, `Shape` -> `Gather` -> `Unsqueeze` ->
`Concat` -> `Reshape` chains of PyTorch exports).  Before the importer
sees a model, `prepare` runs, on a copy (the user's model is never
modified):

1. every unnamed node gets the name the importer's diagnostics gave it,
   `<OpType>_<index>`, and the original index of every node is kept, so
   that an error names the node as the user's file has it;
2. every node of an op type the importer has no converter for that onnx
   defines as a function (GroupNormalization, Mish, RMSNormalization, ...)
   is replaced by onnx's body for it, its nodes named after the node
   (`functions`, D-COMPILE-ONNX-FUNCTIONS; before shape inference, which
   does not see through some of them);
3. ONNX's strict shape inference (which also fills the types of outputs
   the model leaves open: a failure is one located error), then
   `onnx.checker.check_model`, whose verdict is a note: the checker
   rejects models onnxruntime runs (an output whose shape depends on an
   operand computed at run time has no shape to declare), and the
   importer's own diagnostics say more precisely what it cannot convert;
4. opsets older than `TARGET_OPSET` are upgraded with onnx's version
   converter (what IREE's importer does), so converters read one form of
   each op (a model it cannot convert stays as it is: the converters still
   read the older attribute forms they know);
5. initializers are constants: those the model also lists as graph inputs
   (IR version 3 required it) are dropped from the inputs, as
   D-COMPILE-IFACE always read them;
6. onnxscript's optimizer (`onnxscript.optimizer.optimize_ir`): constant
   folding of everything computable at compile time, `ConstantOfShape`
   included (onnxscript keeps it by default to keep files small; here its
   values become weights anyway), shape subgraphs of static shapes,
   sequences of known length, no-op removal (Identity, Dropout in
   inference) and its standard rewrites (Pad into Conv, BatchNormalization
   into Conv, ...).  The model's input and output names are kept.  Its
   passes run as `optimizer()` builds them, with the multi-output rewrite
   rules guarded (`_FirstNodeGuard`: linear in the graph).

The choice of onnxscript over onnx-simplifier and onnxoptimizer, with the
measured figures, is D-COMPILE-SIMPLIFY in docs/spec-decisions.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import version_converter

from nem.frontends.onnx.functions import expand_functions
from nem.frontends.onnx.op_types import SUPPORTED

TARGET_OPSET = 17
"""Default-domain opset older models are upgraded to (IREE's choice); newer
models keep theirs."""

NOT_SIMPLIFIED = "graph not simplified"
"""How `Prepared.notes` begins a note saying why the simplifier's graph was
not taken; an import error carries these notes too (`entry`)."""

FOLD_LIMIT = 1 << 62
"""Tensor size limit of constant folding: none.  A constant the program
needs is a weight whatever its size; one left unfolded would be a node the
importer cannot run at compile time."""


@dataclass
class Prepared:
    """The model the importer converts, and what `prepare` did to it."""

    model: onnx.ModelProto
    node_index: dict[str, tuple[int, str]]
    """Node name -> (its index, its op type) in the user's model.  Every
    node has a name after `prepare`; one the simplifier made carries the
    name of the user's node it replaces (`restore_names`)."""
    notes: list[str] = field(default_factory=list)
    """One line per step that changed something or could not run."""
    checker: str | None = None
    """Why `onnx.checker.check_model` rejects the model, or None."""
    arrays: dict[str, Any] = field(default_factory=dict)
    """The values of the large initializers the simplifier computed, by
    name (numpy arrays): `model` holds only their type (`simplify`)."""
    flow: list[tuple[str, list[str], list[str]]] = field(default_factory=list)
    """The user's nodes that compute from the graph's inputs, in order,
    (name, inputs, outputs): where the work of a node the simplifier folded
    into another went (`fusions.fused_into`)."""
    source_opset: int | None = None
    """The default-domain opset of the user's model, before the version
    converter upgraded it (an op's meaning at it: Resize-10's coordinates,
    `resize.resize`)."""


LARGE = 4096
"""Elements above which an initializer is left out of shape inference
(`infer_shapes_strict`): its type is all inference needs."""


def infer_shapes_strict(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX's strict shape inference of `model` (a new model holding the
    inferred value_info and outputs; raises `ShapeInferenceError`), run on
    `_probe(model)`."""
    try:
        return onnx.shape_inference.infer_shapes(_probe(model), strict_mode=True)
    except Exception as e:  # InferenceError, and onnx's checker and schema errors alike
        raise ShapeInferenceError(str(e).strip() or type(e).__name__) from e


def value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """The types ONNX's shape inference (not strict: as far as it gets)
    gives the values of `model`, initializers and graph inputs included."""
    probe = _probe(model)
    try:
        g = onnx.shape_inference.infer_shapes(probe).graph
    except Exception:  # a model onnx cannot read is reported by the strict inference after
        g = probe.graph
    return {v.name: v.type for v in (*g.input, *g.value_info, *g.output)} | {
        t.name: onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in g.initializer
    }


def _probe(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` for shape inference, without its large initializers:
    inference serializes the model it is given, and a copy of VGG-19's
    575 MB of weights took it 5 s.  They are given to it as typed graph
    inputs instead; small ones (shapes, axes) keep their values for data
    propagation."""
    g = model.graph
    light = onnx.GraphProto(name=g.name)
    light.node.extend(g.node)
    light.input.extend(g.input)
    listed = {i.name for i in g.input}
    for init in g.initializer:
        n = 1
        for d in init.dims:
            n *= d
        if n <= LARGE:
            light.initializer.append(init)
        elif init.name not in listed:
            light.input.append(
                onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
            )
    light.output.extend(g.output)
    light.value_info.extend(g.value_info)
    probe = onnx.helper.make_model(
        light, opset_imports=model.opset_import, ir_version=max(model.ir_version, 4)
    )
    probe.functions.extend(model.functions)
    return probe


class ShapeInferenceError(Exception):
    """ONNX's strict shape inference rejects the model (its message)."""


def with_shapes(model: onnx.ModelProto, inferred: onnx.ModelProto) -> None:
    """Put the value_info and output types of `inferred` into `model` (in place)."""
    del model.graph.value_info[:]
    model.graph.value_info.extend(inferred.graph.value_info)
    del model.graph.output[:]
    model.graph.output.extend(inferred.graph.output)


def default_opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def name_nodes(graph: onnx.GraphProto) -> dict[str, tuple[int, str]]:
    """Give every unnamed node of `graph` the name `<OpType>_<index>` and
    every node named as an earlier one `<name>_<index>` (each made unique),
    and return name -> (index, op type).  Names must be unique because
    everything after this keys on them: diagnostics (a Hardmax named as the
    Relu before it was reported as that Relu, node 0), the simplifier's
    renaming back (`restore_names`) and the roofline's groups (three Convs
    named `conv` showed as one group per simplifier name, `node_Conv_0`,
    and "'conv' (Conv) fused into" it); onnx's checker accepts duplicate
    node names, so models have them (D-COMPILE-SIMPLIFY)."""
    taken = {n.name for n in graph.node if n.name}
    index: dict[str, tuple[int, str]] = {}
    for k, n in enumerate(graph.node):
        if not n.name or n.name in index:
            base = name = f"{n.name or n.op_type}_{k}"
            j = 1
            while name in taken:
                j += 1
                name = f"{base}_{j}"
            n.name = name
            taken.add(name)
        index[n.name] = (k, n.op_type)
    return index


def restore_names(
    graph: onnx.GraphProto, user: onnx.GraphProto, known: dict[str, tuple[int, str]]
) -> None:
    """Name each node of `graph` (the simplified model) that is not one of
    the user's after the user's node it replaces: the node computing the
    same output value, or the nearest node of the same op type before it
    along first inputs (a Conv with a BatchNormalization or a Pad folded in
    is the user's Conv).  Names are labels only: diagnostics and locations
    then name the user's node (D-COMPILE-LOC)."""
    producer = {o: n for n in user.node for o in n.output}
    taken = {n.name for n in graph.node}
    for n in graph.node:
        if n.name in known:
            continue
        first = next((producer[o] for o in n.output if o in producer), None)
        chosen, q = first, first
        for _ in range(4):
            if q is None or q.op_type == n.op_type:
                chosen = q or first
                break
            q = producer.get(q.input[0]) if q.input else None
        if chosen is not None and chosen.name not in taken:
            taken.discard(n.name)
            n.name = chosen.name
            taken.add(chosen.name)


def passthrough_restored(model: onnx.ModelProto, inputs: list[str]) -> onnx.ModelProto:
    """`model` (the simplified one) with a graph input that is also a graph
    output named as the user named it: onnxscript's optimizer renames such an
    input `X` to another name `X'` and adds `X = Identity(X')`, which
    changed the model's interface and so discarded the whole simplification
    (a Shape -> Concat -> Reshape chain was then a "shape computed at run
    time": an outside user's report, session 22).  The Identity is removed
    and `X'` renamed back to `X` everywhere; an input renamed without such
    an Identity is left as it is (the caller then keeps the user's graph)."""
    g = model.graph
    inits = {i.name for i in g.initializer}
    for vi, name in zip([i for i in g.input if i.name not in inits], inputs):
        if vi.name == name:
            continue
        renamed = vi.name
        copy = [n for n in g.node if n.op_type == "Identity" and list(n.input) == [renamed]]
        if len(copy) != 1 or list(copy[0].output) != [name]:
            continue
        g.node.remove(copy[0])
        for n in g.node:
            n.input[:] = [name if i == renamed else i for i in n.input]
        for v in (*g.output, *g.value_info):
            if v.name == renamed:
                v.name = name
        vi.name = name
    return model


def constant_inputs_removed(model: onnx.ModelProto) -> int:
    """Drop the graph inputs that are initializers (constants, D-COMPILE-IFACE);
    the IR version is raised to 4 where IR 3 required them.  Returns how many."""
    inits = {i.name for i in model.graph.initializer}
    keep = [i for i in model.graph.input if i.name not in inits]
    dropped = len(model.graph.input) - len(keep)
    if dropped:
        del model.graph.input[:]
        model.graph.input.extend(keep)
    return dropped


@contextmanager
def _quiet(names: tuple[str, ...]) -> Iterator[None]:
    """Silence the libraries' loggers (their warnings are not the user's business;
    what matters is reported in `Prepared.notes`)."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _fold(node: Any) -> bool | None:  # node: an onnx_ir Node
    return True if node.op_type == "ConstantOfShape" else None


OPTIMIZER_VERSIONS = "0.7."
"""onnxscript versions whose `optimize_ir` pass list `optimizer` mirrors
(pyproject pins `onnxscript>=0.7,<0.8`); another version runs its own
`optimize_ir` unchanged."""


def rewrite_rules() -> list[Any]:
    """onnxscript's default rewrite rules (`rewriter._DEFAULT_REWRITE_RULES`,
    same rules, same order), each rule whose pattern has several output nodes
    (0.7: `SlicesSplit`) behind `_FirstNodeGuard`, each whose pattern names
    a constant matching only that constant (`_exact`)."""
    import copy

    from onnxscript import rewriter

    rules = []
    for rule in map(_exact, rewriter._DEFAULT_REWRITE_RULES):
        matcher = getattr(rule, "_matcher", None)
        if matcher is not None and not matcher.pattern.has_single_output_node:
            guarded: Any = copy.copy(rule)
            guarded._matcher = _FirstNodeGuard(matcher)  # duck-typed: its one method
            rule = guarded
        rules.append(rule)
    return rules


def _exact(rule: Any) -> Any:
    """`rule` (an onnxscript RewriteRule), or a copy of it whose constant
    patterns match their value exactly.  onnxscript matches a pattern's
    constant within `math.isclose(rel_tol=1e-5, abs_tol=1e-8)`: its no-op
    rules made `x + 1e-9` into `x` (`Log(Relu(x) + 1e-9)` gave -inf where
    onnxruntime gives -20.7) and `x * 1.000005` too, an outside user's wrong
    results (session 65, D-COMPILE-SIMPLIFY)."""
    import copy

    from onnxscript.rewriter import _pattern_ir

    pattern = getattr(rule, "_target_pattern", None)
    if pattern is None or not any(
        isinstance(v, _pattern_ir.Constant) for node in pattern for v in node.inputs
    ):
        return rule
    rule = copy.deepcopy(rule)  # (the library's own rules stay as they are)
    for node in rule._target_pattern:
        for v in node.inputs:
            if isinstance(v, _pattern_ir.Constant):
                v._rel_tol = v._abs_tol = 0.0
    return rule


class _FirstNodeGuard:
    """A multi-output pattern's matcher that first checks the node it is
    given against the pattern's first output node (op type and domain), as
    the matcher's own first step does.  onnxscript 0.7's
    `SimplePatternMatcher.match` builds an op-type index of the whole graph
    before that check, for every node tried: quadratic in the graph (a chain
    of 3,000 nodes: 9M node visits, 5 of its 7.4 s of simplification;
    docs/upstream-reports.md).  A node of another op type fails the match
    either way; the guard only skips the index."""

    def __init__(self, inner: Any) -> None:  # an onnxscript PatternMatcher
        self.inner = inner
        self.pattern = inner.pattern
        self.first = inner.pattern.output_nodes[0]

    def match(self, model: Any, graph_or_function: Any, node: Any, **kw: Any) -> Any:
        if self.first.op.matches(node.op_type) and self.first.domain.matches(node.domain):
            return self.inner.match(model, graph_or_function, node, **kw)
        from onnxscript.rewriter import MatchResult

        return MatchResult().fail("first output node: op type or domain differs")


def optimizer() -> Any:
    """The pass `onnxscript.optimizer.optimize_ir` (0.7) runs with no size
    limit and `ConstantOfShape` folded, with `rewrite_rules()` for its
    default rules: the same passes in the same order (`optimize_ir` takes no
    rule list), checked by test_onnx_prepare_linear.py against
    `optimize_ir`'s own output."""
    import onnx_ir as ir
    import onnx_ir.passes.common as common_passes
    from onnxscript import rewriter
    from onnxscript.optimizer import _constant_folding

    return ir.passes.Sequential(
        common_passes.InlinePass(),
        ir.passes.PassManager(
            [
                _constant_folding.FoldConstantsPass(
                    shape_inference=True,
                    input_size_limit=FOLD_LIMIT,
                    output_size_limit=FOLD_LIMIT,
                    should_fold=_fold,
                ),
                rewriter.RewritePass(rewrite_rules()),
                common_passes.RemoveUnusedNodesPass(),
                common_passes.RemoveUnusedFunctionsPass(),  # type: ignore[no-untyped-call]
                common_passes.RemoveUnusedOpsetsPass(),
            ],
            steps=2,
            early_stop=True,
        ),
        common_passes.RemoveUnusedNodesPass(),
        common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common_passes.LiftSubgraphInitializersToMainGraphPass(),
        common_passes.DeduplicateInitializersPass(),
        common_passes.CommonSubexpressionEliminationPass(),
        common_passes.OutputFixPass(),
        common_passes.NameFixPass(),
    )


def simplify(model: onnx.ModelProto, arrays: dict[str, Any] | None = None) -> onnx.ModelProto:
    """onnxscript's optimizer with every constant folded (module docstring,
    step 6): `optimizer()`, or on an onnxscript other than 0.7 its own
    `optimize_ir`.  Given `arrays`, the large initializers the optimizer
    computed go there (`kept_apart`) instead of into the model."""
    import onnx_ir as ir
    import onnxscript
    from onnxscript.optimizer import optimize_ir

    with _quiet(("onnxscript", "onnx_ir")):
        mir = ir.serde.deserialize_model(model)
        if onnxscript.__version__.startswith(OPTIMIZER_VERSIONS):
            optimizer()(mir)
        else:
            optimize_ir(
                mir, input_size_limit=FOLD_LIMIT, output_size_limit=FOLD_LIMIT, should_fold=_fold
            )
        if arrays is not None:
            kept_apart(mir, arrays)
        return ir.serde.serialize_model(mir)


KEPT_APART = "nem-simplifier-arrays"
"""The external-data location of an initializer `kept_apart` (a file that
does not exist: reading the model's copy fails rather than reads zeros)."""


def kept_apart(mir: Any, arrays: dict[str, Any]) -> None:
    """Move the values of the large initializers of `mir` (an onnx_ir model)
    that the optimizer computed (numpy arrays of the ONNX type's own dtype)
    into `arrays`, leaving each in `mir` as external data of its type and
    shape at `KEPT_APART`.  Serializing them into the model and decoding
    them back is two copies of each weight: the light VGG-19's weights are
    575 MB made by `ConstantOfShape` (1.5 s of its 6.5 s import)."""
    import numpy as np
    import onnx_ir as ir
    from onnx.helper import tensor_dtype_to_np_dtype

    for name, value in mir.graph.initializers.items():
        t = value.const_value
        if not isinstance(t, ir.Tensor) or t.size <= LARGE:
            continue
        array = t.numpy()
        if not isinstance(array, np.ndarray) or array.dtype.kind not in "fiu":
            continue
        if array.dtype != tensor_dtype_to_np_dtype(t.dtype.value):
            continue
        arrays[name] = np.ascontiguousarray(array)
        value.const_value = ir.ExternalTensor(
            KEPT_APART, 0, array.nbytes, t.dtype, shape=t.shape, name=name
        )


def crossed_clips(model: onnx.ModelProto) -> int:
    """Clip nodes whose constant bounds cross (min above max).  onnxscript's
    optimizer (0.7) merges `Clip(Clip(x, max=a), min=b)` into `Clip(x, b, a)`,
    which is another function when b > a (ONNX's Clip then gives `a`
    everywhere, the chain `b`): a simplification that adds one is refused
    (D-COMPILE-SIMPLIFY)."""
    from onnx import numpy_helper

    def scalar(t: onnx.TensorProto) -> bool:  # weights are not decoded: only scalars
        return all(d == 1 for d in t.dims)

    consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer if scalar(i)}
    for n in model.graph.node:
        if (
            n.op_type == "Constant"
            and n.attribute
            and n.attribute[0].name == "value"
            and scalar(n.attribute[0].t)
        ):
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    crossed = 0
    for n in model.graph.node:
        if n.op_type == "Clip" and len(n.input) == 3:
            lo, hi = consts.get(n.input[1]), consts.get(n.input[2])
            if (
                lo is not None
                and hi is not None
                and lo.size == 1
                and hi.size == 1
                and float(lo.reshape(())) > float(hi.reshape(()))
            ):
                crossed += 1
    return crossed


def undefined_reads(model: onnx.ModelProto) -> list[str]:
    """Inputs of the main graph's nodes that no graph input, initializer or
    earlier node defines.  onnxscript's optimizer (0.7.2, `Flatten2Reshape`)
    names the shape initializer of every Flatten of a value `X` `X/shape`: of
    two Flattens of one value, the second reads `X/shape_1`, which the graph
    never gets (docs/upstream-reports.md, report 16).  A simplification that
    leaves such a read is refused (D-COMPILE-SIMPLIFY)."""
    g = model.graph
    known = {i.name for i in g.input} | {i.name for i in g.initializer} | {""}
    missing = []
    for n in g.node:
        missing += [x for x in n.input if x not in known]
        known.update(n.output)
    return missing


def same_conv_strides_past_window(model: onnx.ModelProto) -> bool:
    """Whether a Conv under auto_pad SAME has a stride longer than its window on
    some axis, the one case where the total padding can be negative.
    onnxscript's optimizer (0.7, `normalize_pad_format_conv`) turns auto_pad
    into explicit pads clamped at 0, which for a total of -3 or less is not
    what onnxruntime computes; the importer decides such a node itself
    (D-COMPILE-SAME-NEG), so the graph is not simplified."""
    from onnx import helper

    for n in model.graph.node:
        if n.op_type != "Conv":
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        auto = attrs.get("auto_pad", b"NOTSET")
        if (auto.decode() if isinstance(auto, bytes) else auto) not in ("SAME_UPPER", "SAME_LOWER"):
            continue
        kernel = list(attrs.get("kernel_shape", []))
        strides = list(attrs.get("strides", [1] * len(kernel)))
        if not kernel and any(s > 1 for s in strides):  # the window is the weights': unknown
            return True
        dilations = list(attrs.get("dilations", [1] * len(kernel)))
        if any(s > (k - 1) * d + 1 for k, s, d in zip(kernel, strides, dilations)):
            return True
    return False


def _interface(model: onnx.ModelProto) -> tuple[list[str], list[str]]:
    inits = {i.name for i in model.graph.initializer}
    return (
        [i.name for i in model.graph.input if i.name not in inits],
        [o.name for o in model.graph.output],
    )


def _working(graph: onnx.GraphProto) -> list[tuple[str, list[str], list[str]]]:
    """`Prepared.flow`: the nodes reading a graph input or a value computed
    from one; the others (of weights and constants only) are computed while
    compiling and do no work in the program."""
    live = {i.name for i in graph.input} - {i.name for i in graph.initializer}
    out = []
    for n in graph.node:
        if any(i in live for i in n.input):
            live.update(n.output)
            out.append((n.name, list(n.input), list(n.output)))
    return out


def user_graph(
    model: onnx.ModelProto,
) -> tuple[onnx.ModelProto, dict[str, tuple[int, str]], dict[str, int]]:
    """Steps 1 and 2 on a copy of `model`: every node named (`name_nodes`)
    and function ops replaced by their bodies (`expand_functions`); the copy,
    the node index and the op types expanded.  The graph whose node names
    the program's locations carry (D-COMPILE-LOC), so what reads a model's
    nodes beside a compiled program (`traffic`) names them the same way."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    node_index = name_nodes(m.graph)
    return m, node_index, expand_functions(m, SUPPORTED, node_index, value_types)


def prepare(
    model: onnx.ModelProto,
    simplify_graph: bool = True,
    early: Callable[[onnx.ModelProto, dict[str, tuple[int, str]]], bool] | None = None,
) -> Prepared:
    """The model the importer converts (module docstring).  Raises
    `ShapeInferenceError` when strict shape inference fails; the importer
    locates it.  `early(model, node_index)` sees the model after step 5,
    before the simplifier is loaded; True: the model fails whatever the
    simplifier does, which is then skipped (D-COMPILE-EARLY-UNSUPPORTED)."""
    m, node_index, expanded = user_graph(model)
    with_shapes(m, infer_shapes_strict(m))
    user = m.graph
    checker = None
    try:
        onnx.checker.check_model(m)
    except onnx.checker.ValidationError as e:
        checker = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    flow = _working(m.graph)
    notes: list[str] = []
    if expanded:
        notes.append(
            "replaced by their onnx function bodies (D-COMPILE-ONNX-FUNCTIONS): "
            + ", ".join(f"{n} {op}" for op, n in sorted(expanded.items()))
        )
    interface = _interface(m)
    opset = default_opset(m)
    if opset < TARGET_OPSET:
        try:
            m = version_converter.convert_version(m, TARGET_OPSET)
            notes.append(f"opset {opset} upgraded to {TARGET_OPSET} (onnx version converter)")
        except Exception as e:  # the converter raises RuntimeError and ValueError alike
            notes.append(
                f"opset {opset} kept: the onnx version converter failed "
                f"({str(e).strip().splitlines()[0] if str(e).strip() else e})"
            )
    m.ir_version = max(m.ir_version, 4)
    dropped = constant_inputs_removed(m)
    if dropped:
        notes.append(
            f"{dropped} initializer{'s' if dropped > 1 else ''} listed as graph "
            "inputs read as constants"
        )
    kept: dict[str, Any] = {}  # Prepared.arrays
    if simplify_graph and early is not None and early(m, node_index):
        simplify_graph = False
    if simplify_graph and undefined_reads(m):
        # (a node reading what no earlier node defines, a cycle among them: onnxscript's
        # optimizer ran out of memory on two Relus reading each other, an outside tester,
        # session 66; the importer names the node)
        simplify_graph = False
    if simplify_graph:
        before = len(m.graph.node)
        arrays: dict[str, Any] = {}
        try:
            simplified = simplify(m, arrays)
        except Exception as e:  # a library failure must not stop the compile
            notes.append(f"{NOT_SIMPLIFIED}: onnxscript's optimizer failed ({_root_cause(e)})")
        else:
            lost = undefined_reads(simplified)
            if lost and not undefined_reads(m):
                notes.append(
                    f"{NOT_SIMPLIFIED}: onnxscript's optimizer left a node reading "
                    f"'{lost[0]}', which nothing in the graph defines"
                )
            elif crossed_clips(simplified) > crossed_clips(m):
                notes.append(
                    f"{NOT_SIMPLIFIED}: onnxscript's optimizer merged Clips whose "
                    "bounds cross (min above max), which changes the result"
                )
            elif same_conv_strides_past_window(m):
                notes.append(
                    f"{NOT_SIMPLIFIED}: a Conv under auto_pad SAME strides past "
                    "its window, whose padding onnxscript's optimizer would fix at 0"
                )
            elif _interface(passthrough_restored(simplified, interface[0])) == interface:
                m, kept = simplified, arrays
                restore_names(m.graph, user, node_index)
                if len(m.graph.node) != before:
                    notes.append(
                        f"graph simplified from {before} to {len(m.graph.node)} "
                        "nodes (onnxscript optimizer)"
                    )
            else:
                notes.append(
                    f"{NOT_SIMPLIFIED}: onnxscript's optimizer renamed the "
                    "model's inputs or outputs"
                )
    if checker is not None:
        notes.insert(0, f"onnx.checker.check_model rejects the model: {checker}")
    return Prepared(m, node_index, notes, checker, kept, flow, opset)


def _root_cause(e: BaseException) -> str:
    """The innermost exception `e` was raised from, as `Type: message`: a
    failed onnx_ir pass wraps the error in one naming the pass manager
    object's repr (an outside user, session 63, read `'<onnx_ir.passes.
    PassManager object at 0x7f...>' pass` in a remark)."""
    while e.__cause__ is not None:
        e = e.__cause__
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
