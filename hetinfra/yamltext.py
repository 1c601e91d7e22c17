"""The one YAML reader of user files: safe tags only, bounded size, no duplicate keys. Every stage
may use it (it imports only hetinfra.errors and hetinfra.fileio): the spec, a kubeconfig, the Pulumi
stack config a user edits in OUT.

PyYAML's safe_load expands aliases without limit (a "billion laughs" document of a few hundred
bytes grows to gigabytes) and follows recursive aliases (``&a [*a]``) into infinite structures,
and it keeps the last of two equal keys without a word (a second ``infrastructure:`` block would
silently replace the first). Here the node tree is composed first and walked once, counting every
node an alias would expand to, before anything is constructed.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from hetinfra.errors import InvalidInputError
from hetinfra.fileio import MAX_INT_DIGITS, read_text

#: most nodes the expanded document may hold (the largest example spec has a few hundred)
MAX_NODES = 100_000
#: most aliases (``*name``) one document may use
MAX_ALIASES = 200
#: deepest nesting of mappings and sequences
MAX_DEPTH = 64
_MERGE = "tag:yaml.org,2002:merge"
#: YAML 1.1's plain numbers less the two forms that read as another number than the one written: a
#: leading 0 (``014`` was the octal 12) and base 60 (``1:30`` was 90). Such a scalar stays text, so a
#: number field refuses it naming the field (spec.load says what to write) and a text field keeps it
#: as written (``name: 0123`` was 83).
NUMBER_FORMS = {
    "tag:yaml.org,2002:int": re.compile(r"""^(?:[-+]?0b[0-1_]+
                                          |[-+]?(?:0|[1-9][0-9_]*)
                                          |[-+]?0x[0-9a-fA-F_]+)$""", re.X),
    "tag:yaml.org,2002:float": re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                                            |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                                            |[-+]?\.(?:inf|Inf|INF)
                                            |\.(?:nan|NaN|NAN))$""", re.X),
}


class _Loader(yaml.SafeLoader):
    """SafeLoader that counts the aliases it meets while composing, and reads numbers as written
    (:data:`NUMBER_FORMS`)."""

    yaml_implicit_resolvers = {first: [(tag, NUMBER_FORMS.get(tag, rx)) for tag, rx in resolvers]
                               for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def __init__(self, stream: str):
        super().__init__(stream)
        self.alias_count = 0
        self.depth = 0

    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        # PyYAML composes by recursion: 3,000 nested '[' end in a RecursionError before the tree
        # could be walked, so the depth is bounded here, while composing
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH + 1:
                mark = self.peek_event().start_mark
                raise InvalidInputError(f"{self.name}:{mark.line + 1}:{mark.column + 1}: YAML nested deeper than "
                                        f"{MAX_DEPTH} levels", hint="a spec nests a few levels; flatten the value")
            return self._compose_counted(parent, index)
        finally:
            self.depth -= 1

    def _compose_counted(self, parent, index):  # noqa: ANN001
        if self.check_event(yaml.AliasEvent):
            self.alias_count += 1
            if self.alias_count > MAX_ALIASES:
                mark = self.peek_event().start_mark
                raise InvalidInputError(f"{self.name}:{mark.line + 1}: more than {MAX_ALIASES} YAML aliases",
                                        hint="write the values out instead of repeating anchors")
        return super().compose_node(parent, index)


def _at(where: str, node: yaml.Node) -> str:
    return f"{where}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"


def _check_tree(root: yaml.Node, where: str) -> None:
    """Refuse recursive aliases, expansions past MAX_NODES, nesting past MAX_DEPTH and duplicate keys."""
    count = 0
    path: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 0, False)]
    while stack:
        node, depth, leaving = stack.pop()
        if leaving:
            path.discard(id(node))
            continue
        count += 1
        if count > MAX_NODES:
            raise InvalidInputError(f"{where}: the YAML expands to more than {MAX_NODES} values (an alias bomb or a "
                                    "huge list)", hint="a spec needs a few hundred values; remove repeated anchors")
        if depth > MAX_DEPTH:
            raise InvalidInputError(f"{_at(where, node)}: YAML nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode):
            _bounded_int(node, where)
            continue
        if id(node) in path:
            raise InvalidInputError(f"{_at(where, node)}: recursive YAML alias (a value that contains itself)")
        path.add(id(node))
        stack.append((node, depth, True))
        if isinstance(node, yaml.MappingNode):
            _no_duplicate_keys(node, where)
            children = [n for pair in node.value for n in pair]
        else:
            children = list(node.value)
        stack.extend((child, depth + 1, False) for child in reversed(children))


_INT = "tag:yaml.org,2002:int"


def _bounded_int(node: yaml.ScalarNode, where: str) -> None:
    """An integer of at most MAX_INT_DIGITS digits (hex and binary: as many as that in bits), as the JSON
    readers take: Python refuses to make one of over 4,300 digits, so a 5,000-digit ``rate_rps`` was a
    ValueError traceback saying to call sys.set_int_max_str_digits, and a 5,000-digit hex one was when
    its error printed it."""
    if node.tag != _INT:
        return
    digits = node.value.replace("_", "").lstrip("+-")
    digits = digits[2:] if digits[:2].lower() in ("0x", "0b") else digits
    if len(digits) > MAX_INT_DIGITS:
        raise InvalidInputError(f"{_at(where, node)}: an integer of {len(digits):,} digits ({digits[:12]}...), more "
                                f"than the {MAX_INT_DIGITS} any number hetinfra reads has",
                                hint="write the number the field means (the spec's reference gives each range)")


def _no_duplicate_keys(node: yaml.MappingNode, where: str) -> None:
    seen: dict[Any, yaml.Node] = {}
    for key, _ in node.value:
        if key.tag == _MERGE or not isinstance(key, yaml.ScalarNode):
            continue
        if key.value in seen:
            first = seen[key.value].start_mark.line + 1
            raise InvalidInputError(f"{_at(where, key)}: duplicate key '{key.value[:60]}' (first at line {first})",
                                    hint="YAML keeps only the last one; merge the two into one")
        seen[key.value] = key


def compose_and_load(text: str, where: str) -> tuple[yaml.Node | None, Any]:
    """(node tree for line numbers, Python data) of a YAML document, checked as above.
    YAML syntax errors propagate as yaml.YAMLError (the caller words them)."""
    loader = _Loader(text)
    loader.name = where
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_tree(node, where)
        return node, loader.construct_document(node)
    finally:
        loader.dispose()


def yaml_problem(exc: yaml.YAMLError, where: str, text: str) -> str:
    """One line saying where in ``text`` (``file:line:column``) and what PyYAML refused. A character
    YAML does not allow (a control character, U+FFFE) is located by its line and column: PyYAML's own
    message gave an offset and "<unicode string>" on a second line."""
    if isinstance(exc, yaml.reader.ReaderError) and isinstance(exc.character, int):
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        return f"{where}:{line}:{column}: the character U+{exc.character:04X} is not allowed in YAML; remove it"
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        return f"{at}: YAML syntax error: {exc.problem or exc.context or 'invalid YAML'}"
    return f"{where}: YAML error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def read_yaml_mapping(path, what: str, *, max_bytes: int, hint: str) -> dict:
    """The YAML mapping in the file ``path`` that another program wrote or a user edits (a kubeconfig,
    ``Pulumi.<stack>.yaml``): the one file reader (a FIFO is refused, not a hang; bytes that are not
    UTF-8 are named), then :func:`compose_and_load`. An empty file is ``{}``; anything that is not a
    mapping, or not YAML, is InvalidInputError (exit 2) naming ``what`` and the file."""
    where = str(path)
    text = read_text(path, what, max_bytes=max_bytes, hint=hint)
    try:
        _, doc = compose_and_load(text, where)
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"{what} {yaml_problem(exc, where, text)}", hint=hint) from None
    except InvalidInputError as exc:
        raise InvalidInputError(f"{what} {exc.message}", hint=hint) from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InvalidInputError(f"{what} {where}: holds a YAML {type(doc).__name__}, not a mapping", hint=hint)
    return doc
