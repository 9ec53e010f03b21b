"""A dynamic workflow with a map inside, through the API and the UI: children listed after
their parent with `parent` and `depends_on`, their attempts and logs reachable by id (the
map items' ids hold brackets, percent-encoded in the path)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from sluice.sdk.loader import load_module
from sluice.service import RunRequest
from support.http_world import client_for, open_sluice

FLOWS = Path(__file__).resolve().parents[1] / "engine" / "compound_flows.py"


async def test_children_in_the_api_and_the_ui(sqlite_url: str, tmp_path: Path) -> None:
    flows = load_module("compound_flows", str(FLOWS))
    sluice = await open_sluice(sqlite_url)
    try:
        inputs = {"xs": [1, 2], "directory": str(tmp_path)}
        final = await sluice.run_to_end(RunRequest.of(flows.dynamic_map, inputs))
        async with client_for(sluice) as api:
            detail = (await api.get(f"/api/v1/executions/{final.id}")).json()
            nodes = (await api.get(f"/api/v1/executions/{final.id}/nodes")).json()
            item = quote("nested.map_work[1]", safe="")
            attempts = await api.get(f"/api/v1/executions/{final.id}/nodes/{item}/attempts")
            logs = await api.get(f"/api/v1/executions/{final.id}/nodes/{item}/logs")
            page = await api.get(f"/executions/{final.id}")
    finally:
        await sluice.close()
    assert detail["phase"] == "SUCCEEDED" and detail["outputs"] == {"o0": 4 + 9}
    order = [(n["node"], n["parent"]) for n in detail["nodes"]]
    assert order == [
        ("nested", None),
        ("nested:build", "nested"),
        ("nested.map_work", "nested"),
        ("nested.map_work[0]", "nested.map_work"),
        ("nested.map_work[1]", "nested.map_work"),
        ("total", None),
    ]
    listed = nodes if isinstance(nodes, list) else nodes.get("items", nodes)
    assert "nested.map_work[1]" in str(listed)
    assert attempts.status_code == 200, attempts.text
    assert attempts.json()[0]["phase"] == "SUCCESS"
    assert logs.status_code == 200, logs.text
    assert page.status_code == 200 and "nested.map_work[1]" in page.text
