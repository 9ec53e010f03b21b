"""Checks of every value that reaches the resource manager; a bad one raises before anything
is written, with a message naming the value."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sluice.errors import ClaimExceedsQuotaError, InvalidArgumentError, InvalidQuotaError
from sluice.resources.models import Claim, Holder


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_quota(namespace: str, quota: object, max_quota: int) -> int:
    """A quota is an int in 1..max_quota."""
    if isinstance(quota, int) and not isinstance(quota, bool) and 1 <= quota <= max_quota:
        return quota
    raise InvalidQuotaError(
        f"quota of {namespace!r} must be an int from 1 to {max_quota} "
        f"(resources.max_quota), got {quota!r}"
    )


def check_quotas(quotas: Mapping[str, object], max_quota: int) -> dict[str, int]:
    return {check_namespace(ns): check_quota(ns, q, max_quota) for ns, q in quotas.items()}


def check_namespace(namespace: object) -> str:
    # A newline separates namespace from token in the Redis backend's lease index.
    if not isinstance(namespace, str) or not namespace or "\n" in namespace:
        raise InvalidArgumentError(
            f"resource namespace must be a non-empty string without newlines, got {namespace!r}"
        )
    return namespace


def check_namespaces(namespaces: Iterable[str]) -> list[str]:
    if isinstance(namespaces, str):
        raise InvalidArgumentError(f"expected a list of namespaces, got the string {namespaces!r}")
    return list(dict.fromkeys(check_namespace(ns) for ns in namespaces))


def check_token(token: object) -> str:
    if not isinstance(token, str) or not token:
        raise InvalidArgumentError(f"allocation token must be a non-empty string, got {token!r}")
    return token


def check_holder(holder: Holder) -> Holder:
    # Empty names are the usage counters' "every project/domain" marker.
    for name in ("project", "domain"):
        value = getattr(holder, name)
        if not isinstance(value, str) or not value:
            raise InvalidArgumentError(f"holder {name} must be a non-empty string, got {value!r}")
    if not _is_int(holder.priority):
        raise InvalidArgumentError(f"holder priority must be an int, got {holder.priority!r}")
    return holder


def check_claims(claims: Sequence[Claim], max_quota: int) -> tuple[Claim, ...]:
    if not claims:
        raise InvalidArgumentError("an allocation needs at least one claim")
    seen: set[str] = set()
    for claim in claims:
        check_claim(claim, max_quota)
        if claim.namespace in seen:
            raise InvalidArgumentError(f"namespace {claim.namespace!r} is claimed twice")
        seen.add(claim.namespace)
    return tuple(claims)


def check_claim(claim: Claim, max_quota: int) -> None:
    check_namespace(claim.namespace)
    if not _is_int(claim.units) or claim.units < 1:
        raise InvalidQuotaError(
            f"claim on {claim.namespace!r}: units must be an int >= 1, got {claim.units!r}"
        )
    if claim.default_quota is not None:
        if _is_int(claim.default_quota) and claim.default_quota < 1:
            # A lock of capacity 0 could never be granted: refuse it like any claim too big.
            raise ClaimExceedsQuotaError(claim.namespace, claim.units, claim.default_quota)
        check_quota(claim.namespace, claim.default_quota, max_quota)
