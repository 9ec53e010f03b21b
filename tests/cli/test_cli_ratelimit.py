"""`sluice ratelimit set|ls|clear` in a subprocess; a bad limit exits 2 naming the value."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli import sluice


def test_set_ls_and_clear_a_rate_limit(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    bad = sluice("ratelimit", "set", "openai", "5/fortnight", db=db)
    assert bad.returncode == 2
    assert "'5/fortnight'" in bad.stderr and "'fortnight'" in bad.stderr
    done = sluice("ratelimit", "set", "openai", "100/min", "--burst", "10", db=db)
    assert done.returncode == 0, done.stderr
    assert "rate limit openai set to 100/min, burst 10" in done.stdout
    shown = sluice("ratelimit", "ls", db=db)
    assert "openai: 100/min, burst 10 (operator), 0 busy key(s), 0 waiting" in shown.stdout
    cleared = sluice("ratelimit", "clear", "openai", db=db)
    assert "rate limit openai cleared: no limit applies" in cleared.stdout
