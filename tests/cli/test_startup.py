"""The command line imports only what a command needs: `--help` lists commands from a static
table (no store, SQLAlchemy, Alembic or pydantic), and opening a store at its head revision
never imports Alembic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from sluice.cli.main import COMMANDS, cli

HEAVY = ("sqlalchemy", "alembic", "mako", "pydantic", "httpx", "sluice.store", "sluice.engine")


def loaded_after(code: str, tmp_path: Path) -> list[str]:
    """Modules loaded by a fresh interpreter after running `code`."""
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    modules: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return modules


def test_help_imports_no_store_sqlalchemy_alembic_or_pydantic(tmp_path: Path) -> None:
    code = "from sluice.cli.main import main\nmain(['--help'])"
    loaded = loaded_after(code, tmp_path)
    heavy = [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY)]
    assert heavy == [], f"`sluice --help` imported {heavy[:10]}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_listed_command_loads_under_its_name(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert isinstance(command, click.Command)
    assert command.name == name or name in cli.commands


def test_opening_a_store_at_its_head_revision_does_not_import_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    opener = (
        "import asyncio\nfrom sluice.store.store import Store\n"
        f"async def go():\n    s = await Store.open({url!r})\n    await s.close()\n"
        "asyncio.run(go())\n"
    )
    assert "alembic" in loaded_after(opener, tmp_path)  # the first open creates the schema
    assert "alembic" not in loaded_after(opener, tmp_path)  # later ones only read its revision


def test_head_revision_from_the_files_is_alembics() -> None:
    from alembic.script import ScriptDirectory

    from sluice.store.migrate import alembic_config, head_revision

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()


def test_a_one_task_run_on_a_warm_sqlite_store_imports_nothing_it_does_not_use(
    tmp_path: Path,
) -> None:
    (tmp_path / "one.py").write_text(
        "import sluice\n\n\n@sluice.task\ndef hello() -> str:\n    return 'hi'\n\n\n"
        "@sluice.workflow\ndef one() -> str:\n    return hello()\n"
    )
    code = (
        "from sluice.cli.main import main\n"
        f"assert main(['--db', 'sqlite:///{tmp_path}/s.db', 'run', '-q', 'one.py:one']) == 0"
    )
    loaded_after(code, tmp_path)  # creates the store (migrations need more)
    loaded = loaded_after(code, tmp_path)
    assert "sluice.engine" in loaded  # it ran
    unused = ("sqlalchemy.orm", "sqlalchemy.dialects.postgresql", "croniter", "fsspec", "rich")
    assert [m for m in loaded if m.startswith(unused)] == []
