"""The project's own metadata filter: a conjunction of conditions on metadata keys.

Callers above the store say what they want (`Where.eq(source_type="document")`,
`Where.eq(doc_key=k) & Where.ne("doc_sha", v)`); the store translates it once into ChromaDB's
dialect (`core.store.vendor.chroma_where`) and the lexical index into SQL. A plain mapping of
the same shape (`{"key": value}`, `{"key": {"$eq" | "$ne" | "$in": ...}}`, `{"$and": [...]}`)
is read into a `Where` by `Where.of`, so a filter written as data still means one thing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Scalar = str | int | float | bool
Operator = Literal["eq", "ne", "in"]
_OPERATORS: dict[str, Operator] = {"$eq": "eq", "$ne": "ne", "$in": "in"}


@dataclass(frozen=True)
class Condition:
    """One metadata key compared with a value (or, for `in`, a tuple of values)."""

    key: str
    op: Operator
    value: Scalar | tuple[Scalar, ...]


@dataclass(frozen=True)
class Where:
    """Every condition must hold."""

    conditions: tuple[Condition, ...] = ()

    @classmethod
    def eq(cls, **pairs: Scalar) -> Where:
        return cls(tuple(Condition(key, "eq", _scalar(key, value))
                         for key, value in pairs.items()))

    @classmethod
    def ne(cls, key: str, value: Scalar) -> Where:
        return cls((Condition(key, "ne", _scalar(key, value)),))

    @classmethod
    def is_in(cls, key: str, values: Iterable[Scalar]) -> Where:
        return cls((Condition(key, "in", tuple(_scalar(key, v) for v in values)),))

    def __and__(self, other: Where) -> Where:
        return Where(self.conditions + other.conditions)

    def __bool__(self) -> bool:
        return bool(self.conditions)

    @classmethod
    def of(cls, where: Where | Mapping[str, Any] | None) -> Where | None:
        """A `Where` from itself, from its mapping form, or None; anything else is refused
        with a ValueError naming the part not understood."""
        if where is None or isinstance(where, Where):
            return where
        if not isinstance(where, Mapping):
            raise ValueError(f"where: not a filter: {where!r}")
        if set(where) == {"$and"} and isinstance(where["$and"], list | tuple):
            found = Where()
            for part in where["$and"]:
                found = found & (cls.of(part) or Where())
            return found
        conditions = []
        for key, value in where.items():
            if key.startswith("$"):
                raise ValueError(f"where: the operator {key} is not supported")
            if isinstance(value, Mapping):
                if len(value) != 1 or next(iter(value)) not in _OPERATORS:
                    raise ValueError(f"where: {key}: the comparison {dict(value)!r} is not "
                                     "supported")
                [(name, operand)] = value.items()
                op = _OPERATORS[name]
                if op == "in":
                    if not isinstance(operand, list | tuple):
                        raise ValueError(f"where: {key}: $in takes a list")
                    conditions.append(Condition(key, op, tuple(_scalar(key, v)
                                                               for v in operand)))
                else:
                    conditions.append(Condition(key, op, _scalar(key, operand)))
            else:
                conditions.append(Condition(key, "eq", _scalar(key, value)))
        return cls(tuple(conditions))


def _scalar(key: str, value: Any) -> Scalar:
    if not isinstance(value, str | int | float | bool):
        raise ValueError(f"where: {key}: {value!r} is not a string, number or boolean")
    return value
