"""task logs index

Revision ID: 0003
Revises: 0002

The index of task log segments (sluice/logs/): which segments each attempt wrote, where they
are in the log store, their size, line counts and times. The log lines themselves live in the
log store, not in the database.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "task_logs",
        sa.Column("execution_id", sa.String(length=64), nullable=False),
        sa.Column("node_id", sa.String(length=255), nullable=False),
        sa.Column("attempt", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("segment", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("writer", sa.String(length=200), server_default="", nullable=False),
        sa.Column("bytes", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("lines", sa.Integer(), server_default="0", nullable=False),
        sa.Column("dropped_lines", sa.Integer(), server_default="0", nullable=False),
        sa.Column("removed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("first_at", sa.Double(), nullable=True),
        sa.Column("last_at", sa.Double(), nullable=True),
        sa.Column("closed_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint(
            "execution_id", "node_id", "attempt", "segment", name=op.f("pk_task_logs")
        ),
    )


def downgrade() -> None:
    op.drop_table("task_logs")
