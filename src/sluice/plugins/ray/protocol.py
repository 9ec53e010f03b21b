"""What the plugin and its job's runner agree on: where the job is given (an environment
variable of the job's runtime_env) and how the answer is marked in the job's log."""

from __future__ import annotations

import json
from typing import Any

JOB_ENV = "SLUICE_RAY_JOB"
RESULT_MARKER = "::sluice-result::"


def find_answer(log: str) -> dict[str, Any] | None:
    """The answer the runner printed last in `log`, or None if it printed none."""
    for line in reversed(log.splitlines()):
        _, marker, text = line.partition(RESULT_MARKER)  # output without a newline may precede
        if marker:
            try:
                answer = json.loads(text)
            except ValueError:
                return None
            return answer if isinstance(answer, dict) else None
    return None
