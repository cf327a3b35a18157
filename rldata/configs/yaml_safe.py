"""The one YAML loader every command uses: ``yaml.safe_load`` with the document's size bounded.

YAML aliases let a few hundred bytes stand for billions of values (an "alias bomb": ``&a [x, x]``,
``&b [*a, *a]``, ...).  PyYAML shares the node of each alias, so loading is cheap, but whoever walks
the result (validation, ``json.dumps`` into the runs table, a trainer config) expands it: 6-8 GB, or a
hang.  :func:`safe_load` composes the document, counts its values as they would be after expansion
(shared nodes counted once per use, memoized, so the count itself is cheap), and refuses a document
over :data:`MAX_VALUES`, nested deeper than :data:`MAX_DEPTH`, or with a recursive alias.  The error
is a ``yaml.YAMLError``, so each caller reports it as it reports any invalid YAML, with its file.

A mapping that names a key twice is refused too (:class:`YAMLDuplicateKeyError`, with the line of the
second): PyYAML keeps the last value silently, so the file would not say what it seems to.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["MAX_DEPTH", "MAX_VALUES", "YAMLDuplicateKeyError", "YAMLLimitError", "safe_load"]

MAX_VALUES = 100_000  # scalars, lists and mappings after aliases are expanded; configs have dozens
MAX_DEPTH = 64  # nesting of lists/mappings


class YAMLLimitError(yaml.YAMLError):
    """A YAML document over the bounds (too many values once expanded, too deep, or recursive)."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = None


class YAMLDuplicateKeyError(yaml.YAMLError):
    """A mapping that names a key twice; ``problem_mark`` is where the second one is."""

    def __init__(self, key: str, mark):
        super().__init__(f"duplicate key {key!r}")
        self.problem = f"duplicate key {key!r}"
        self.problem_mark = mark

    def __str__(self) -> str:
        where = f" (line {self.problem_mark.line + 1})" if self.problem_mark is not None else ""
        return f"{self.problem}{where}"


def _unique_keys(node: yaml.MappingNode) -> None:
    seen: set = set()
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value != "<<":  # << is a merge, not a key
            k = (key.tag, key.value)
            if k in seen:
                raise YAMLDuplicateKeyError(key.value, key.start_mark)
            seen.add(k)


class _Loader(yaml.SafeLoader):
    """SafeLoader, kept separate so nothing registered on yaml.SafeLoader elsewhere changes it; its
    composer recurses once per level, so the depth is bounded as it composes."""

    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YAMLLimitError(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def safe_load(stream: str | bytes) -> Any:
    """Like ``yaml.safe_load`` for one document, refusing documents over the module's bounds."""
    loader = _Loader(stream)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check(node)
        return loader.construct_document(node)
    except RecursionError:
        raise YAMLLimitError(f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check(root: yaml.Node) -> None:
    """Expanded size and depth of the node graph (iterative: a deep document cannot recurse here)."""
    size: dict[int, int] = {}  # id(node) -> values under it, expanded
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            on_path.discard(key)
            if size[key] > MAX_VALUES:
                raise YAMLLimitError(
                    f"the document expands to more than {MAX_VALUES} values through its aliases "
                    "(an alias bomb?)"
                )
            if depth[key] > MAX_DEPTH:
                raise YAMLLimitError(f"nested deeper than {MAX_DEPTH} levels")
            continue
        if key in size:
            continue
        if key in on_path:
            raise YAMLLimitError("an alias refers to a value that contains it (a recursive alias)")
        on_path.add(key)
        if isinstance(node, yaml.MappingNode):
            _unique_keys(node)
        stack.append((node, True))
        for kid in _children(node):
            if id(kid) in on_path:
                raise YAMLLimitError("an alias refers to a value that contains it (a recursive alias)")
            if id(kid) not in size:
                stack.append((kid, False))
        if len(on_path) > MAX_DEPTH + 1:
            raise YAMLLimitError(f"nested deeper than {MAX_DEPTH} levels")
