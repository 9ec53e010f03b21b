"""Kubernetes resource quantities ("500m", "2Gi", "1e3") and ResourceQuota refusal messages."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIXES: dict[str, Decimal] = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]{0,2})$")
# The admission plugin's wording: "exceeded quota: <name>, requested: k=v,k=v, used: ...,
# limited: ...". Only the first quota that refused the object is named.
_QUOTA_MESSAGE = re.compile(
    r"exceeded quota: [^,]+, requested: (?P<requested>.*?), used: .*?, limited: (?P<limited>[^\s]*)"
)


def parse_quantity(value: str | int | float) -> Decimal:
    """The quantity's value in base units (cores, bytes); ValueError if it is not one."""
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match or match.group(2) not in _SUFFIXES:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 500m, 2Gi, 4)")
    try:
        return Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 500m, 2Gi, 4)") from None


def quota_requests_exceed_limits(message: str) -> bool:
    """True when a quota refusal says the object alone asks for more than the quota's hard
    limit of some resource: waiting will never help (upstream #2933)."""
    match = _QUOTA_MESSAGE.search(message)
    if not match:
        return False
    requested = _resource_list(match.group("requested"))
    limited = _resource_list(match.group("limited"))
    return any(name in limited and amount > limited[name] for name, amount in requested.items())


def _resource_list(text: str) -> dict[str, Decimal]:
    found: dict[str, Decimal] = {}
    for item in text.split(","):
        name, _, amount = item.partition("=")
        try:
            found[name.strip()] = parse_quantity(amount)
        except ValueError:
            continue
    return found
