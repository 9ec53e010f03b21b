"""How `executions ls` and `show` render, as functions over the service's views of records
(no subprocess)."""

from __future__ import annotations

from rich.console import Console

from sluice.cli.executions import ago, executions_table, print_execution, short_ids
from sluice.service import convert
from sluice.spec.phases import ExecutionPhase, NodePhase
from sluice.store.records import ExecutionRecord, NodeRecord

NOW = 1_800_000_000.0


def execution(id: str, created_at: float, reason: str = "") -> ExecutionRecord:
    return ExecutionRecord(
        id=id,
        project="etl",
        domain="prod",
        workflow_name="nightly_warehouse_refresh_workflow",
        workflow_version="1",
        phase=ExecutionPhase.PENDING,
        inputs={},
        created_at=created_at,
        updated_at=created_at,
        launch_plan="nightly_warehouse_refresh_plan",
        reason=reason,
    )


def test_short_ids_are_the_shortest_unique_prefixes_of_eight_or_more() -> None:
    ids = ["x0abcdefg1234567890", "x0abcdefg1999999999", "x0zzzzzzz0000000000", "short"]
    assert short_ids(ids) == {
        "x0abcdefg1234567890": "x0abcdefg12",
        "x0abcdefg1999999999": "x0abcdefg19",
        "x0zzzzzzz0000000000": "x0zzzzzz",
        "short": "short",
    }


def test_times_read_relative_to_now() -> None:
    assert ago(NOW - 5, NOW) == "5s ago"
    assert ago(NOW - 180, NOW) == "3m ago"
    assert ago(NOW - 3 * 3600, NOW) == "3h ago"
    assert ago(NOW - 2 * 86400, NOW) == "2d ago"
    assert ago(None, NOW) == ""


def test_ls_fits_80_columns_one_line_per_row() -> None:
    records = [
        execution(
            f"x0abcdefg{i}123456789",
            NOW - 60 * i,
            "waiting: 2/2 active (x1…, x2…), "
            f"position {i}, and a long tail explaining the cap in detail",
        )
        for i in range(1, 4)
    ]
    console = Console(width=80, record=True)
    views = [convert.execution_summary(r, NOW, i) for i, r in enumerate(records, 1)]
    console.print(executions_table(views, NOW))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    body = [line for line in lines if "x0abcdefg" in line]
    assert len(body) == 3  # no row wraps onto a second line
    assert "x0abcdefg1" in body[0] and "1m ago" in body[0]
    assert len(lines) == 2 + 3  # the header and its rule, then one line per row


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "flows.py", line 3, in boom\n'
    '    raise ValueError("no rows for 2026-12-01")\n'
    "ValueError: no rows for 2026-12-01\n"
)


def shown_execution(record: ExecutionRecord, nodes: list[NodeRecord]) -> str:
    console = Console(width=100, record=True)
    views = [convert.node_execution(n, None, None, []) for n in nodes]
    print_execution(convert.execution(record, views, [], NOW), console)
    return console.export_text()


def test_show_prints_a_failed_nodes_error_as_text_and_values_as_json() -> None:
    record = execution("x0abcdefg1234567890", NOW)
    record.phase = ExecutionPhase.FAILED
    record.inputs = {"day": "2026-12-01", "tables": ["a", "b"], "dry": False}
    record.outputs = {"rows": None}
    record.error = {"code": "TaskFailed", "message": TRACEBACK, "kind": "USER", "node": "load"}
    error = {"code": "TaskFailed", "message": TRACEBACK, "kind": "USER"}
    load = NodeRecord(record.id, "load", phase=NodePhase.FAILED, error=error)
    other = {"code": "Timeout", "message": "ran over 60s", "kind": "SYSTEM"}
    late = NodeRecord(record.id, "late", phase=NodePhase.FAILED, error=other)
    lines = shown_execution(record, [load, late]).splitlines()
    assert 'inputs: {"day": "2026-12-01", "dry": false, "tables": ["a", "b"]}' in lines
    assert 'outputs: {"rows": null}' in lines
    assert not any("\\n" in line or "{'code'" in line for line in lines)
    at = lines.index("error in node load: TaskFailed (USER): ValueError: no rows for 2026-12-01")
    assert lines[at + 1 : at + 5] == TRACEBACK.splitlines()  # as they are, once
    assert sum("Traceback" in line for line in lines) == 1
    assert "node late failed: Timeout (SYSTEM): ran over 60s" in lines
