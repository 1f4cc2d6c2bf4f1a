"""Kubernetes resource quantities ("500m", "2Gi", "1e3") as exact decimals.

The scheduler, quota admission and the inventory all do arithmetic on quantities, and the quota
403 message prints them back, so parsing and canonical formatting live together here.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


class Quantity:
    """An exact amount plus the suffix family it was written in (binary `Mi` or decimal `M`).

    The family matters only for printing: the API server keeps a sum in the format of its
    operands, so `512Mi + 512Mi` prints `1Gi` while `500m + 500m` prints `1`.
    """

    __slots__ = ("value", "binary")

    def __init__(self, value: Decimal | int, binary: bool = False):
        self.value = Decimal(value)
        self.binary = binary

    @classmethod
    def parse(cls, text: str | int | float) -> Quantity:
        if isinstance(text, int | float):
            return cls(Decimal(str(text)))
        s = str(text).strip()
        if not s:
            raise ValueError("empty quantity")
        for suffix, mult in _BINARY.items():
            if s.endswith(suffix):
                return cls(_number(s[: -len(suffix)]) * mult, binary=True)
        # Exponent form: 1e3, 1.5E6 (but "E" alone is the exa suffix: "2E" is 2e18).
        lowered = s.lower()
        if "e" in lowered[1:] and not s.endswith(("e", "E")):
            return cls(_number(s))
        suffix = s[-1] if s[-1] in _DECIMAL and not s[-1].isdigit() else ""
        number = s[: -len(suffix)] if suffix else s
        return cls(_number(number) * _DECIMAL[suffix])

    def __add__(self, other: Quantity) -> Quantity:
        binary = self.binary if self.value != 0 else other.binary
        return Quantity(self.value + other.value, binary)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.value - other.value, self.binary)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __le__(self, other: Quantity) -> bool:
        return self.value <= other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({self})"

    def __str__(self) -> str:
        return format_quantity(self.value, binary=self.binary)


def _number(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation as exc:
        raise ValueError(f"invalid quantity {text!r}") from exc
    if not value.is_finite():
        raise ValueError(f"invalid quantity {text!r}")
    return value


def parse(text: str | int | float | None) -> Decimal:
    """The exact amount of a quantity string (0 for None)."""
    if text is None:
        return Decimal(0)
    return Quantity.parse(text).value


def format_quantity(value: Decimal, *, binary: bool = False) -> str:
    """Canonical form, as the API server prints it: the largest suffix that keeps an integer."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    value = abs(value)
    if binary and value == value.to_integral_value():
        ivalue = int(value)
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            mult = _BINARY[suffix]
            if ivalue >= mult and ivalue % mult == 0:
                return f"{sign}{ivalue // mult}{suffix}"
        return f"{sign}{ivalue}"
    for suffix in ("E", "P", "T", "G", "M", "k", "", "m", "u", "n"):
        scale = _DECIMAL[suffix]
        scaled = value / scale
        if scaled == scaled.to_integral_value() and (scaled >= 1 or suffix == "n"):
            if suffix == "" or scaled % 1000 != 0 or suffix == "E":
                return f"{sign}{int(scaled)}{suffix}"
    # Finer than a nanounit: round up the way the API server does.
    return f"{sign}{int((value / _DECIMAL['n']).to_integral_value(rounding='ROUND_CEILING'))}n"
