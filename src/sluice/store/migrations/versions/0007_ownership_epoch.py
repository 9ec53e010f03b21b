"""ownership epochs: every claim of an execution starts a new epoch, which the owner's writes
name

Revision ID: 0007
Revises: 0006

An engine that was paused past its lease, or cut off from the store, may wake up still
believing it drives an execution another engine has taken over. Every claim now bumps
`owner_epoch`, and every write an owner makes (nodes, events, the execution's phase) is
accepted only with the owner AND the epoch it claimed (docs/invariants.md, "Fencing"). The
epoch also names the tokens and the cache reservation an attempt holds, so a stale owner's
release or renewal never touches what the new owner holds.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("executions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("owner_epoch", sa.Integer(), server_default="0", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("executions", schema=None) as batch_op:
        batch_op.drop_column("owner_epoch")
