"""Recursive-descent parser for `.nem` config documents.

Parses `include` declarations, `type_family` declarations (SPEC Type Family
Grammar, GRAM-22) and `device` configurations (GRAM-18..21) into the frozen
model of `nem.dialect.device_model`.  The entry points that take a
`TokenCursor` let the program parser handle an inline `device { ... }` or a
leading `include` at its current position.

Choices beyond the EBNF (docs/conformance.md Gaps E), each kept small and local:

* The appendix forms are accepted as written: `quant = required on dst`,
  `src: any_supported` and `conformance: { MUST }` (empty instantiation).
* `variant_ref` is parsed with one token of backtracking: in `a.b` the `b`
  belongs to the family id only if `<` or `.` follows, so `cast.default` is
  family `cast`, variant `default`.
* `device_config` bodies are tied to `extends` here: a base device needs
  `spec_version` (DEV-01) and `opcode.mandatory` (GRAM-18), a derived one must
  not write `spec_version` (INH-02).
* `l1_size_bytes`/`l2_size_bytes` take integer-literal arithmetic (`+ - * /
  mod`, parentheses, `* / mod` above `+ -`, left-associative, `/` truncating
  toward zero as in CONST-05), evaluated at parse time; a config has no consts.
* Family-local rules TFD-01..04 are checked as soon as a family is parsed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nem.dialect.device_model import DeviceDecl, Topology
from nem.dialect.diagnostics import SourceLoc, fail, register_source
from nem.dialect.expressions import ExprError, apply_binop
from nem.dialect.family_model import (
    ABSENT,
    ANY_SUPPORTED,
    ELEM_TYPES,
    MAY,
    MUST,
    TypeFamily,
    Variant,
    VariantRef,
)
from nem.dialect.limits import MAX_NESTING_DEPTH
from nem.dialect.semantics.units import UNIT_TYPES
from nem.frontends.nem_text.cursor import TokenCursor, describe
from nem.frontends.nem_text.lexer import (
    EOF,
    FLOAT,
    ID,
    INT,
    STRING,
    Token,
    TokenStream,
    tokenize,
    unquote,
)


@dataclass(frozen=True)
class ConfigDocument:
    """A parsed config file: include paths, then families and devices in order.

    `file` and the locations are excluded from `==` (round-trip comparisons).
    """

    file: str = field(compare=False)
    includes: tuple[str, ...] = ()
    families: tuple[TypeFamily, ...] = ()
    devices: tuple[DeviceDecl, ...] = ()
    include_locs: tuple[SourceLoc | None, ...] = field(default=(), compare=False, repr=False)
    # Included files only: where the config part ended at a program statement.
    stopped_at: SourceLoc | None = field(default=None, compare=False, repr=False)


def parse_config_document(
    text: str,
    file: str,
    *,
    included: bool = False,
    at: tuple[int, int] = (0, 0),
    lazy: bool = False,
) -> ConfigDocument:
    """Parse a whole config document (GRAM-01).

    With `included=True` the file is being imported through `include`: parsing
    stops silently at the first token that cannot start a config declaration,
    because a program in an included file is ignored (INC-05).  The devices of
    an inline `device X { ... }` directive at the head of such a program are
    still imported (decision D-INC-PROGRAM).  `at` as `parse_nem`'s.

    `lazy=True`: the text is lexed only as far as it is parsed
    (`TokenStream`), for a caller that only asks whether the text is a config
    document and drops any error (`find_device` on a program file): it then
    raises exactly when the eager parse does and returns the same document,
    but the error it raises may be another one (a parse error before a later
    bad token, which the eager lexer reports first).
    """
    register_source(file, text, at)
    tokens = TokenStream(text, file, at) if lazy else tokenize(text, file, at)
    cur = TokenCursor(tokens, file)
    includes = []
    while cur.at("include", ID):
        includes.append(parse_include(cur))
    families: list[TypeFamily] = []
    devices: list[DeviceDecl] = []
    stopped_at = None
    while not cur.at_eof():
        if cur.at("type_family", ID):
            families.append(parse_type_family(cur))
        elif at_device_config(cur):
            devices.append(parse_device_config(cur))
        elif included:
            stopped_at = cur.loc()
            break
        elif cur.at("include", ID):
            raise cur.error(
                "'include' must come before every declaration",
                "GRAM-01",
                "move this include to the top of the file",
            )
        else:
            raise cur.error(
                f"expected 'type_family' or 'device', found {describe(cur.tok)}",
                "GRAM-01",
                "a config document holds only type_family and device "
                "declarations; program statements belong in a program file",
            )
    return ConfigDocument(
        file,
        tuple(p for p, _ in includes),
        tuple(families),
        tuple(devices),
        tuple(loc for _, loc in includes),
        stopped_at,
    )


def at_device_config(cur: TokenCursor) -> bool:
    """True at `device ID {` or `device ID extends` (not the `device ID` directive)."""
    nxt = cur.peek(2)
    return (
        cur.at("device", ID)
        and cur.peek().kind == ID
        and (nxt.text == "{" or (nxt.text == "extends" and nxt.kind == ID))
    )


def parse_include(cur: TokenCursor) -> tuple[str, SourceLoc]:
    """`include STRING` -> (path, location of the `include` keyword)."""
    loc = cur.loc()
    cur.expect("include", "GRAM-01")
    tok = cur.expect_kind(
        STRING, "GRAM-01", "a quoted file path after 'include'", 'write include "file.nem"'
    )
    return unquote(tok.text), loc


# -- type families ------------------------------------------------------------


def parse_family_id(cur: TokenCursor, rule: str) -> str:
    first = cur.expect_id(rule, "a family id")
    if cur.at_punct(".") and cur.peek().kind == ID:
        cur.advance()
        return f"{first.text}.{cur.advance().text}"
    return first.text


def _elem(cur: TokenCursor, rule: str, what: str = "an element type") -> str:
    tok = cur.expect_id(rule, what)
    if tok.text not in ELEM_TYPES:
        raise cur.error(
            f"'{tok.text}' is not an element type",
            "TYPE-01",
            f"use one of {', '.join(ELEM_TYPES)}",
            tok,
        )
    return tok.text


def _elem_list(cur: TokenCursor, open_: str, close: str, rule: str) -> tuple[str, ...]:
    cur.expect(open_, rule)
    elems = [_elem(cur, rule)]
    while cur.accept(","):
        elems.append(_elem(cur, rule))
    cur.expect(close, rule, fix=f"close the list with '{close}'")
    return tuple(elems)


def parse_type_family(cur: TokenCursor) -> TypeFamily:
    """`type_family family_id type_params? { body }` (GRAM-22), then TFD-01..04."""
    loc = cur.loc()
    cur.expect("type_family", "GRAM-22")
    fid = parse_family_id(cur, "GRAM-22")
    params: list[tuple[str, tuple[str, ...]]] = []
    if cur.accept("<"):
        while True:
            name = cur.expect_id("GRAM-22", "a type parameter name")
            cur.expect(":", "GRAM-22", "after the type parameter name")
            params.append((name.text, _elem_list(cur, "{", "}", "GRAM-22")))
            if not cur.accept(","):
                break
        cur.expect(">", "GRAM-22", "to close the type parameters")
    cur.expect("{", "GRAM-22", "to open the family body")
    operands: list[tuple[str, str]] = []
    attributes: list[tuple[str, str]] = []
    quant_on: list[str] = []
    binding_toks: list[Token] = []
    attr_toks: list[tuple[str, Token]] = []
    while not (cur.at("variants", ID) and cur.peek().text == ":"):
        name = cur.expect_id("GRAM-22", "an operand binding, attribute binding or 'variants:'")
        if cur.at_punct(":"):
            if attributes:
                raise cur.error(
                    f"operand binding '{name.text}' follows an attribute binding",
                    "GRAM-22",
                    "write all operand bindings before attribute bindings",
                    name,
                )
            cur.advance()
            binding_toks.append(cur.tok)
            operands.append((name.text, cur.expect_id("GRAM-22", "a type").text))
        else:
            cur.expect("=", "GRAM-22", f"or ':' after '{name.text}'")
            value = cur.expect_id("GRAM-22", "an attribute value")
            attr_toks.append((name.text, value))
            if name.text == "quant" and value.text == "required" and cur.accept("on"):
                quant_on.append(cur.expect_id("GRAM-22", "an operand name after 'on'").text)
                while cur.accept(","):
                    quant_on.append(cur.expect_id("GRAM-22", "an operand name").text)
            attributes.append((name.text, value.text))
    cur.advance()  # `variants`
    cur.advance()  # `:`
    variants: list[Variant] = []
    while not cur.at_punct("}"):
        variants.append(_parse_variant(cur, binding_toks))
    cur.advance()
    family = TypeFamily(
        fid,
        tuple(params),
        tuple(operands),
        tuple(attributes),
        tuple(quant_on),
        tuple(variants),
        loc,
    )
    _check_family(cur, family, binding_toks, attr_toks)
    return family


def _parse_variant(cur: TokenCursor, binding_toks: list[Token]) -> Variant:
    loc = cur.loc()
    name = cur.expect_id("GRAM-22", "a variant name or '}'").text
    cur.expect(":", "GRAM-22", "after the variant name")
    cur.expect("{", "GRAM-22", "to open the variant's operand bindings")
    bindings = []
    while not cur.accept("}"):
        op = cur.expect_id("GRAM-22", "an operand binding or '}'").text
        cur.expect(":", "GRAM-22", "in the operand binding")
        binding_toks.append(cur.tok)
        bindings.append((op, cur.expect_id("GRAM-22", "a type").text))
    cur.expect(
        "conformance",
        "GRAM-22",
        "after the variant's bindings",
        "every variant needs `conformance: { MUST <...> MAY <...> }`",
    )
    cur.expect(":", "GRAM-22")
    cur.expect("{", "GRAM-22")
    entries = []
    while not cur.accept("}"):
        cls_tok = cur.tok
        if cls_tok.text not in (MUST, MAY) or cls_tok.kind != ID:
            raise cur.error(f"expected 'MUST', 'MAY' or '}}', found {describe(cls_tok)}", "GRAM-22")
        cur.advance()
        inst = _elem_list(cur, "<", ">", "GRAM-22") if cur.at_punct("<") else ()
        entries.append((cls_tok.text, inst, cur.loc(cls_tok)))
    return Variant(
        name,
        tuple(bindings),
        tuple((c, i) for c, i, _ in entries),
        loc,
        tuple(loc for *_, loc in entries),
    )


def _check_family(
    cur: TokenCursor, fam: TypeFamily, binding_toks: list[Token], attr_toks: list[tuple[str, Token]]
) -> None:
    """TFD-01..04: instantiations fit the parameters, one class each, valid bindings."""
    names = {p for p, _ in fam.params}
    allowed = set(ELEM_TYPES) | names | {ABSENT, ANY_SUPPORTED}
    for tok in binding_toks:
        if tok.text not in allowed:
            raise cur.error(
                f"operand binding type '{tok.text}' is not an element type, a type "
                f"parameter of {fam.id} or 'absent'",
                "TFD-03",
                "declare it as a type parameter <T: {...}> or use an element type",
                tok,
            )
    for attr, value in attr_toks:
        if attr == "quant" and value.text not in ("required", ABSENT):
            raise cur.error(
                f"'quant' must be 'required' or 'absent', not '{value.text}'",
                "TFD-03",
                "write `quant = required` or `quant = absent`",
                value,
            )
        if attr == "accum" and value.text not in ELEM_TYPES:
            raise cur.error(
                f"'accum' must be an element type, not '{value.text}'",
                "TFD-03",
                f"use one of {', '.join(ELEM_TYPES)}",
                value,
            )
    bound = {b for b, _ in fam.operands} | {b for v in fam.variants for b, _ in v.bindings}
    for target in fam.quant_required_on:
        if target not in bound:
            raise fail(
                f"'quant = required on {target}': {fam.id} has no operand binding '{target}'",
                fam.loc,
                "TFD-03",
                "name one of " + ", ".join(sorted(bound)),
            )
    seen_variants: set[str] = set()
    for v in fam.variants:
        if v.name in seen_variants:
            raise fail(
                f"variant '{v.name}' is declared twice in {fam.id}",
                v.loc,
                "TFD-04",
                "give each variant of a family a distinct name",
            )
        seen_variants.add(v.name)
        classes: dict[tuple[str, ...], str] = {}
        for (cls, inst), loc in zip(v.conformance, v.entry_locs):
            _check_inst(fam, v, inst, loc)
            if inst in classes:
                shown = f"<{', '.join(inst)}>" if inst else "the instantiation"
                raise fail(
                    f"{shown} of {fam.id}.{v.name} is listed twice ({classes[inst]} and {cls})",
                    loc,
                    "TFD-02",
                    "each instantiation has exactly one conformance class",
                )
            classes[inst] = cls


def _check_inst(fam: TypeFamily, v: Variant, inst: tuple[str, ...], loc: SourceLoc) -> None:
    if len(inst) != len(fam.params):
        want = (
            f"{len(fam.params)} element type(s) <{', '.join(p for p, _ in fam.params)}>"
            if fam.params
            else "no instantiation (the family is not parameterized)"
        )
        raise fail(
            f"conformance entry of {fam.id}.{v.name} gives {len(inst)} element "
            f"type(s), expected {want}",
            loc,
            "TFD-01",
            f"instantiate {fam.id} with one element type per parameter",
        )
    for (pname, domain), elem in zip(fam.params, inst):
        if elem not in domain:
            raise fail(
                f"'{elem}' is outside the domain of {pname} "
                f"{{{', '.join(domain)}}} in {fam.id}.{v.name}",
                loc,
                "TFD-01",
                f"use one of {', '.join(domain)} or widen the parameter's set",
            )


# -- devices --------------------------------------------------------------------

_BLOCK_ORDER = (
    "spec_version",
    "topology",
    "unit_characteristics",
    "opcode.mandatory",
    "opcode.extended",
)


def parse_device_config(cur: TokenCursor) -> DeviceDecl:
    """`device ID (extends ID)? { body }` (GRAM-18), with DEV-01 / INH-02 tied to `extends`."""
    loc = cur.loc()
    cur.expect("device", "GRAM-18")
    name = cur.expect_id("GRAM-18", "a device name").text
    parent = (
        cur.expect_id("GRAM-18", "a parent device name").text if cur.accept("extends") else None
    )
    cur.expect("{", "GRAM-18", "to open the device body")
    locs: dict[str, SourceLoc] = {}
    spec = topology = None
    chars: dict[str, dict[str, int]] = {}
    mandatory: tuple[VariantRef, ...] = ()
    extended: tuple[VariantRef, ...] = ()
    done = -1
    while not cur.accept("}"):
        tok = cur.tok
        if tok.text not in _BLOCK_ORDER or tok.kind == STRING:
            raise cur.error(
                f"expected one of {', '.join(_BLOCK_ORDER[done + 1 :]) or 'nothing'} "
                f"or '}}' in device {name}, found {describe(tok)}",
                "GRAM-18",
            )
        index = _BLOCK_ORDER.index(tok.text)
        if index <= done:
            what = "appears twice" if index == done else f"must come before {_BLOCK_ORDER[done]}"
            raise cur.error(
                f"'{tok.text}' {what} in device {name}",
                "GRAM-18",
                "write the blocks once each, in the order " + ", ".join(_BLOCK_ORDER),
            )
        done = index
        locs[tok.text] = cur.loc()
        if tok.text == "spec_version":
            cur.advance()
            cur.expect("=", "GRAM-18")
            spec = unquote(cur.expect_kind(STRING, "GRAM-18", 'a quoted version like "1.0"').text)
        elif tok.text == "topology":
            topology = _parse_topology(cur, locs)
        elif tok.text == "unit_characteristics":
            chars = _parse_unit_chars(cur, locs)
        elif tok.text == "opcode.mandatory":
            mandatory = _parse_ref_block(cur)
        else:
            extended = _parse_ref_block(cur)
    if parent is None and spec is None:
        raise fail(
            f"base device {name} has no spec_version",
            loc,
            "DEV-01",
            'add `spec_version = "1.0"`, or `extends` a parent device',
        )
    if parent is None and "opcode.mandatory" not in locs:
        raise fail(
            f"base device {name} has no opcode.mandatory block",
            loc,
            "GRAM-18",
            "list the MUST variants, or extend nem_baseline_1_0",
        )
    if parent is not None and spec is not None:
        raise fail(
            f"derived device {name} must not declare spec_version (it is inherited from {parent})",
            locs["spec_version"],
            "INH-02",
            "remove the spec_version line",
        )
    return DeviceDecl(name, parent, spec, topology, chars, mandatory, extended, loc, locs)


def _unit_block(
    cur: TokenCursor, block: str, locs: dict[str, SourceLoc], stop: str | None = None
) -> dict[str, int]:
    units: dict[str, int] = {}
    while cur.tok.kind == ID and cur.tok.text != stop:
        tok = cur.advance()
        if tok.text not in UNIT_TYPES:
            raise cur.error(
                f"'{tok.text}' is not a unit type",
                "GRAM-19",
                f"use one of {', '.join(UNIT_TYPES)}",
                tok,
            )
        if tok.text in units:
            raise cur.error(
                f"unit {tok.text} is declared twice in {block}",
                "GRAM-19",
                "declare each unit type once",
                tok,
            )
        cur.expect("=", "GRAM-19", f"after {tok.text}")
        units[tok.text] = cur.expect_int("GRAM-19", "an integer unit count")
        locs[f"{block}.{tok.text}"] = cur.loc(tok)
    return units


def _parse_topology(cur: TokenCursor, locs: dict[str, SourceLoc]) -> Topology:
    cur.advance()
    cur.expect("{", "GRAM-19", "after 'topology'")
    locs["num_engines"] = cur.loc()
    cur.expect("num_engines", "GRAM-19", "first in topology")
    cur.expect("=", "GRAM-19")
    engines = cur.expect_int("GRAM-19", "an integer engine count")
    locs["l2_size_bytes"] = cur.loc()
    cur.expect("l2_size_bytes", "GRAM-19", "after num_engines")
    cur.expect("=", "GRAM-19")
    l2 = parse_int_expr(cur)
    device_units: dict[str, int] = {}
    if cur.accept("device_units"):
        cur.expect("{", "GRAM-19", "after 'device_units'")
        device_units = _unit_block(cur, "device_units", locs)
        cur.expect("}", "GRAM-19", "to close device_units", "entries are UNIT = INT")
    cur.expect("per_engine", "GRAM-19", "in topology", "topology needs a per_engine block")
    cur.expect("{", "GRAM-19", "after 'per_engine'")
    per_engine = _unit_block(cur, "per_engine", locs, stop="l1_size_bytes")
    locs["l1_size_bytes"] = cur.loc()
    cur.expect(
        "l1_size_bytes",
        "GRAM-19",
        "in per_engine",
        "per_engine ends with `l1_size_bytes = <bytes>`",
    )
    cur.expect("=", "GRAM-19")
    l1 = parse_int_expr(cur)
    cur.expect("}", "GRAM-19", "after l1_size_bytes (it is the last entry of per_engine)")
    cur.expect("}", "GRAM-19", "to close topology")
    return Topology(engines, l2, device_units, per_engine, l1)


def _parse_unit_chars(cur: TokenCursor, locs: dict[str, SourceLoc]) -> dict[str, dict[str, int]]:
    cur.advance()
    cur.expect("{", "GRAM-20", "after 'unit_characteristics'")
    groups: dict[str, dict[str, int]] = {}
    while not cur.accept("}"):
        unit = cur.expect_id("GRAM-20", "a unit type or '}'")
        if unit.text not in UNIT_TYPES or unit.text in groups:
            problem = "is declared twice" if unit.text in groups else "is not a unit type"
            raise cur.error(
                f"'{unit.text}' {problem} in unit_characteristics",
                "GRAM-20",
                f"use each of {', '.join(UNIT_TYPES)} at most once",
                unit,
            )
        cur.expect("{", "GRAM-20", f"after {unit.text}")
        keys: dict[str, int] = {}
        while not cur.accept("}"):
            key = cur.expect_id("GRAM-20", "a characteristic name or '}'")
            if key.text in keys:
                raise cur.error(f"{unit.text}.{key.text} is declared twice", "GRAM-20", tok=key)
            cur.expect("=", "GRAM-20", f"after {key.text}")
            keys[key.text] = cur.expect_int(
                "GRAM-20", "an integer literal value", "characteristic values are integers"
            )
            locs[f"unit_characteristics.{unit.text}.{key.text}"] = cur.loc(key)
        groups[unit.text] = keys
    return groups


def _parse_ref_block(cur: TokenCursor) -> tuple[VariantRef, ...]:
    block = cur.advance().text
    cur.expect("{", "GRAM-21", f"after '{block}'")
    refs = []
    while not cur.accept("}"):
        refs.append(parse_variant_ref(cur))
    return tuple(refs)


def parse_variant_ref(cur: TokenCursor) -> VariantRef:
    """`family_id type_instantiation? . ID` with the `cast.default` backtrack (GRAM-21)."""
    loc = cur.loc()
    fix = "write FAMILY<elem, ...>.VARIANT, e.g. gemm.float<f16>.no_bias or cast.default"
    family = cur.expect_id("GRAM-21", "a variant reference or '}'", fix).text
    if cur.at_punct(".") and cur.peek().kind == ID and cur.peek(2).text in ("<", "."):
        cur.advance()
        family += "." + cur.advance().text
    inst = _elem_list(cur, "<", ">", "GRAM-21") if cur.at_punct("<") else ()
    cur.expect(".", "GRAM-21", "before the variant name", fix)
    variant = cur.expect_id("GRAM-21", "a variant name", fix).text
    return VariantRef(family, inst, variant, loc)


# -- size expressions -------------------------------------------------------------


def parse_int_expr(cur: TokenCursor, depth: int = 0) -> int:
    """Integer-literal arithmetic with conventional precedence (docs/conformance.md
    Gaps C/E), with the semantics of `nem.dialect.expressions.apply_binop` (64-bit
    values, D-INT-RANGE) and at most MAX_NESTING_DEPTH nested parentheses (D-LIMITS)."""
    value = _term(cur, depth)
    while cur.at_punct("+") or cur.at_punct("-"):
        op = cur.advance()
        value = _binop(cur, op, value, _term(cur, depth))
    return value


def _term(cur: TokenCursor, depth: int) -> int:
    value = _primary(cur, depth)
    while cur.at_punct("*") or cur.at_punct("/") or cur.at("mod", ID):
        op = cur.advance()
        value = _binop(cur, op, value, _primary(cur, depth))
    return value


def _binop(cur: TokenCursor, op: Token, a: int, b: int) -> int:
    try:
        return apply_binop(op.text, a, b)
    except ExprError as e:
        raise cur.error(f"{e} in a size expression", e.rule, tok=op) from None


def _primary(cur: TokenCursor, depth: int) -> int:
    tok = cur.tok
    if tok.kind == INT:
        cur.advance()
        return int(tok.text)
    if cur.accept("("):
        if depth >= MAX_NESTING_DEPTH:
            raise cur.error(
                f"parentheses nested more than {MAX_NESTING_DEPTH} deep (limit D-LIMITS)",
                None,
                "write the size as a literal",
                tok,
            )
        value = parse_int_expr(cur, depth + 1)
        cur.expect(")", "GRAM-16", "to close the parenthesis")
        return value
    if tok.kind == FLOAT:
        raise cur.error(
            f"size {tok.text} is not an integer", "LEX-03", "memory sizes are whole byte counts"
        )
    if tok.kind == ID:
        raise cur.error(
            f"'{tok.text}' cannot appear in a device size",
            "GRAM-19",
            "config documents have no consts; use integer literals and + - * / mod",
        )
    what = "end of file" if tok.kind == EOF else f"'{tok.text}'"
    raise cur.error(f"expected an integer expression, found {what}", "GRAM-16")
