"""resource preemption

Revision ID: 0011
Revises: 0010

Priority preemption (docs/resources.md): the priority of holdings in namespaces where it is
on, the marks preempters leave on their victims, and the operator's per-namespace flags.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "resource_holder_marks",
        sa.Column("namespace", sa.String(length=512), nullable=False),
        sa.Column("token", sa.String(length=512), nullable=False),
        sa.Column("granted_at", sa.Double(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("preempted_by", sa.String(length=512), nullable=True),
        sa.Column("preempter_execution", sa.String(length=64), server_default="", nullable=False),
        sa.Column("preempter_node", sa.String(length=255), server_default="", nullable=False),
        sa.Column("preempter_priority", sa.Integer(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("namespace", "token", name=op.f("pk_resource_holder_marks")),
    )
    op.create_table(
        "resource_preempt_flags",
        sa.Column("namespace", sa.String(length=512), nullable=False),
        sa.PrimaryKeyConstraint("namespace", name=op.f("pk_resource_preempt_flags")),
    )


def downgrade() -> None:
    op.drop_table("resource_preempt_flags")
    op.drop_table("resource_holder_marks")
