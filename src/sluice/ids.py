"""Identifiers: sortable execution ids, engine instance ids and names fitted to a length."""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import time

from sluice.errors import InvalidArgumentError

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def _base32(number: int, width: int) -> str:
    chars = []
    for _ in range(width):
        number, digit = divmod(number, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_execution_id() -> str:
    """A 20-character id that sorts by creation time (ms) and starts with a letter."""
    millis = int(time.time() * 1000)
    return "x" + _base32(millis, 9) + _base32(secrets.randbits(50), 10)


def new_instance_id(role: str) -> str:
    """An id for one running process: role, host and pid, plus randomness for pid reuse."""
    return f"{role}:{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def instance_pid(instance_id: str) -> tuple[str, int] | None:
    """The (host, pid) an instance id was made on, or None if it is not one."""
    parts = instance_id.split(":")
    if len(parts) != 4 or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2])


def fit_name(name: str, min_length: int, max_length: int) -> str:
    """Fit a generated name to [min_length, max_length]: pad with '0', or hash when too long.

    A name that is too long keeps a readable prefix and ends with a hash of the whole name, so
    two long names that differ only at the end stay distinct.
    """
    if min_length > max_length:
        raise InvalidArgumentError(
            f"min_length {min_length} is greater than max_length {max_length}"
        )
    if len(name) < min_length:
        return name + "0" * (min_length - len(name))
    if len(name) <= max_length:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()
    if max_length <= 16:
        return ("f" + digest)[:max_length]
    keep = max_length - 11
    return name[:keep] + "-" + digest[:10]
