"""flyte entities

Revision ID: 0010
Revises: 0009

Flyte tasks, workflows and launch plans registered through the flyteadmin gRPC endpoint of
`sluice serve` (`pyflyte register`, FlyteRemote): the protobuf spec each client sent, its
digest (a re-registration of the same digest is a no-op, a different one under the same
version an error) and, for launch plans, Flyte's ACTIVE/INACTIVE state.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "flyte_entities",
        sa.Column("resource_type", sa.String(length=16), nullable=False),
        sa.Column("project", sa.String(length=255), nullable=False),
        sa.Column("domain", sa.String(length=255), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("version", sa.String(length=128), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("spec", sa.LargeBinary(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint(
            "resource_type", "project", "domain", "name", "version", name=op.f("pk_flyte_entities")
        ),
    )


def downgrade() -> None:
    op.drop_table("flyte_entities")
