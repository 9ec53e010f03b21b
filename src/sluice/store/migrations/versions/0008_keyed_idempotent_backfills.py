"""keyed execution concurrency, idempotency keys, backfills

Revision ID: 0008
Revises: 0007

- executions gain `concurrency_key` (the key a keyed policy gave the execution when it was
  created), `backfill_id` (the backfill that created it) and `slot_generation` (which run of a
  schedule slot it is: 0 for the first, 1, 2, ... for a backfill's reprocessing). The unique
  index of schedule firings takes the generation, so a slot can be run again on purpose while
  a firing still happens once per generation, however many schedulers and backfills run.
- `idempotency_keys`: a caller's key per project, the hash of its request and the execution
  it created, written in the execution's own transaction.
- `backfills` and `backfill_slots`: a backfill and the slots it planned.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_FIRING = sa.text("scheduled_at IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("executions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("concurrency_key", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("backfill_id", sa.String(length=64), nullable=True))
        batch_op.add_column(
            sa.Column("slot_generation", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.drop_index("uq_executions_firing", sqlite_where=_FIRING, postgresql_where=_FIRING)
        batch_op.create_index(
            "uq_executions_firing",
            ["project", "domain", "launch_plan", "scheduled_at", "slot_generation"],
            unique=True,
            sqlite_where=_FIRING,
            postgresql_where=_FIRING,
        )
        batch_op.create_index("ix_executions_backfill", ["backfill_id", "phase"], unique=False)
    op.create_table(
        "idempotency_keys",
        sa.Column("project", sa.String(length=255), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("execution_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("project", "key", name=op.f("pk_idempotency_keys")),
    )
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.create_index("ix_idempotency_keys_expires", ["expires_at"], unique=False)
    op.create_table(
        "backfills",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=255), nullable=False),
        sa.Column("domain", sa.String(length=255), nullable=False),
        sa.Column("launch_plan", sa.String(length=255), nullable=False),
        sa.Column("launch_plan_version", sa.String(length=128), nullable=False),
        sa.Column("start_at", sa.Double(), nullable=False),
        sa.Column("end_at", sa.Double(), nullable=False),
        sa.Column("reprocess", sa.String(length=16), nullable=False),
        sa.Column("max_active", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), server_default="", nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_backfills")),
    )
    with op.batch_alter_table("backfills", schema=None) as batch_op:
        batch_op.create_index("ix_backfills_state", ["state"], unique=False)
    op.create_table(
        "backfill_slots",
        sa.Column("backfill_id", sa.String(length=64), nullable=False),
        sa.Column("slot_at", sa.Double(), autoincrement=False, nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("execution_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("backfill_id", "slot_at", name=op.f("pk_backfill_slots")),
    )


def downgrade() -> None:
    op.drop_table("backfill_slots")
    with op.batch_alter_table("backfills", schema=None) as batch_op:
        batch_op.drop_index("ix_backfills_state")
    op.drop_table("backfills")
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_index("ix_idempotency_keys_expires")
    op.drop_table("idempotency_keys")
    with op.batch_alter_table("executions", schema=None) as batch_op:
        batch_op.drop_index("ix_executions_backfill")
        batch_op.drop_index("uq_executions_firing", sqlite_where=_FIRING, postgresql_where=_FIRING)
        batch_op.create_index(
            "uq_executions_firing",
            ["project", "domain", "launch_plan", "scheduled_at"],
            unique=True,
            sqlite_where=_FIRING,
            postgresql_where=_FIRING,
        )
        batch_op.drop_column("slot_generation")
        batch_op.drop_column("backfill_id")
        batch_op.drop_column("concurrency_key")
