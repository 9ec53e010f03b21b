"""`sluice run` on a pseudo-terminal: what a task prints scrolls above the live table, each
line whole and prefixed with its node, and the final table is intact (item 2 of issue 13: a
task's print() used to tear through the table)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLOWS = ROOT / "tests" / "logs" / "log_flows.py"
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>]")


def run_on_a_terminal(*args: str, db: Path, timeout: float = 120) -> tuple[int, str]:
    """Run `sluice ARGS` with a pseudo-terminal as stdin, stdout and stderr; (exit code,
    everything it wrote, escape sequences included)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 140, 0, 0))
    env = {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{db}", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "sluice", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**env, "SLUICE_ENGINE__WORKERS": "2"},
        cwd=ROOT,
        close_fds=True,
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process is gone
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
    os.close(leader)
    code = process.wait(timeout=10)
    return code, b"".join(chunks).decode(errors="replace")


def screen_lines(raw: str) -> list[str]:
    """The lines written, escape sequences removed (each redraw of the table is repeated)."""
    text = _ESCAPE.sub("", raw).replace("\r\n", "\n")
    return [line.split("\r")[-1].rstrip() for line in text.split("\n")]


def test_task_output_scrolls_above_the_live_table_and_both_stay_intact(tmp_path: Path) -> None:
    code, raw = run_on_a_terminal(
        "run",
        f"{FLOWS}:slow_flow",
        "--input",
        "lines=12",
        "--input",
        "pause=0.1",
        db=tmp_path / "s.db",
    )
    assert code == 0, raw
    assert "\x1b[" in raw  # the live table ran (a terminal, not line mode)
    lines = screen_lines(raw)
    printed = [line for line in lines if "line " in line and "|" in line]
    assert printed == [f"slow_printer | line {i}" for i in range(12)], printed
    tables = [i for i, line in enumerate(lines) if re.match(r"execution \S+ SUCCEEDED \(", line)]
    assert tables, "the final table's heading"
    final = lines[tables[-1] :]
    assert re.fullmatch(r"│ slow_printer │ SUCCEEDED │ 1\s+│\s+│", final[4]), final
    assert final[5].startswith("└") and final[5].endswith("┘"), final
    assert re.fullmatch(r"execution \S+ SUCCEEDED at .+", final[6]), final
    assert final[7] == 'outputs: {"o0": 12}', final


def test_quiet_hides_task_output_but_not_the_table(tmp_path: Path) -> None:
    code, raw = run_on_a_terminal(
        "run", f"{FLOWS}:slow_flow", "--input", "lines=3", "--quiet", db=tmp_path / "s.db"
    )
    assert code == 0, raw
    lines = screen_lines(raw)
    assert not [line for line in lines if "| line " in line]
    assert any(re.match(r"execution \S+ SUCCEEDED \(", line) for line in lines)
