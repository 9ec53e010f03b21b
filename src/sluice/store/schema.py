"""Every table sluice keeps, as SQLAlchemy Core. Timestamps are float seconds since the epoch;
JSON is stored as text so SQLite and PostgreSQL keep the same bytes."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)


class JSONText(sa.types.TypeDecorator[Any]):
    """JSON values stored as text; None stays SQL NULL."""

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else json.dumps(value, separators=(",", ":"))

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        return None if value is None else json.loads(value)


def _time(name: str, nullable: bool = False) -> sa.Column[float]:
    return sa.Column(name, sa.Double, nullable=nullable)


def _name(name: str, length: int = 255, **kw: Any) -> sa.Column[str]:
    return sa.Column(name, sa.String(length), **kw)


task_specs = sa.Table(
    "task_specs",
    metadata,
    _name("project", primary_key=True),
    _name("domain", primary_key=True),
    _name("name", primary_key=True),
    _name("version", 128, primary_key=True),
    sa.Column("spec", JSONText, nullable=False),
    _time("created_at"),
)

workflow_specs = sa.Table(
    "workflow_specs",
    metadata,
    _name("project", primary_key=True),
    _name("domain", primary_key=True),
    _name("name", primary_key=True),
    _name("version", 128, primary_key=True),
    sa.Column("spec", JSONText, nullable=False),
    _time("created_at"),
)

launch_plans = sa.Table(
    "launch_plans",
    metadata,
    _name("project", primary_key=True),
    _name("domain", primary_key=True),
    _name("name", primary_key=True),
    _name("version", 128, primary_key=True),
    _name("workflow", 400, nullable=False),
    sa.Column("spec", JSONText, nullable=False),
    _name("state", 16, nullable=False),
    _time("created_at"),
    _time("updated_at"),
    sa.Index(
        "uq_launch_plans_one_active",
        "project",
        "domain",
        "name",
        unique=True,
        # PostgreSQL's partial predicate lives in migration 0001 only: a postgresql_* keyword
        # here makes SQLAlchemy import its whole PostgreSQL dialect on every start (~30 ms).
        sqlite_where=sa.text("state = 'ACTIVE'"),
    ),
)

executions = sa.Table(
    "executions",
    metadata,
    _name("id", 64, primary_key=True),
    _name("project", nullable=False),
    _name("domain", nullable=False),
    _name("workflow_name", nullable=False),
    _name("workflow_version", 128, nullable=False),
    _name("launch_plan", nullable=True),
    _name("launch_plan_version", 128, nullable=True),
    _name("phase", 16, nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("inputs", JSONText, nullable=False),
    sa.Column("outputs", JSONText),
    sa.Column("error", JSONText),
    sa.Column("options", JSONText, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
    _time("created_at"),
    _time("updated_at"),
    _time("started_at", True),
    _time("ended_at", True),
    _time("scheduled_at", True),
    _name("owner", 200, nullable=True),
    _time("owner_expires_at", True),
    # Bumped by every claim; an owner's writes name it (migration 0007).
    sa.Column("owner_epoch", sa.Integer, nullable=False, server_default="0"),
    sa.Column("version", sa.Integer, nullable=False, server_default="0"),
    # Keyed concurrency, backfills (migration 0008): the concurrency key the governing policy
    # gave at creation, the backfill that created it, and which run of its schedule slot it
    # is (0: the first; a backfill's reprocess makes 1, 2, ...).
    _name("concurrency_key", nullable=True),
    _name("backfill_id", 64, nullable=True),
    sa.Column("slot_generation", sa.Integer, nullable=False, server_default="0"),
    sa.Index("ix_executions_phase", "phase"),
    sa.Index("ix_executions_launch_plan", "project", "domain", "launch_plan", "phase"),
    # Listings newest first (`executions ls`, GET /api/v1/executions) walk this, not a sort.
    sa.Index("ix_executions_created", "created_at", "id"),
    sa.Index(
        "uq_executions_firing",
        "project",
        "domain",
        "launch_plan",
        "scheduled_at",
        "slot_generation",
        unique=True,
        sqlite_where=sa.text("scheduled_at IS NOT NULL"),  # PostgreSQL's: see above
    ),
    sa.Index("ix_executions_backfill", "backfill_id", "phase"),
)

node_executions = sa.Table(
    "node_executions",
    metadata,
    _name("execution_id", 64, primary_key=True),
    _name("node_id", primary_key=True),
    _name("phase", 16, nullable=False),
    sa.Column("task_phase", sa.Integer, nullable=False, server_default="0"),
    sa.Column("phase_version", sa.Integer, nullable=False, server_default="0"),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="0"),
    sa.Column("system_failures", sa.Integer, nullable=False, server_default="0"),
    sa.Column("plugin_state", JSONText),
    sa.Column("plugin_state_version", sa.Integer, nullable=False, server_default="0"),
    sa.Column("inputs", JSONText),
    sa.Column("outputs", JSONText),
    sa.Column("error", JSONText),
    _name("cache_status", 16, nullable=False, server_default="DISABLED"),
    _name("reservation_status", 16, nullable=False, server_default="DISABLED"),
    sa.Column("claims", JSONText),
    _time("started_at", True),
    _time("attempt_started_at", True),
    _time("next_attempt_at", True),
    _time("updated_at"),
    _time("ended_at", True),
    sa.Column("version", sa.Integer, nullable=False, server_default="0"),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    _name("execution_id", 64, nullable=False),
    _name("node_id", nullable=False, server_default=""),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="0"),
    _name("phase", 32, nullable=False),
    sa.Column("phase_version", sa.Integer, nullable=False, server_default="0"),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    _time("occurred_at"),
    sa.Column("info", JSONText),
    sa.Index("ix_events_execution", "execution_id", "id"),
)

notifications = sa.Table(
    "notifications",
    metadata,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    _name("channel", 64, nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    _name("origin", 200, nullable=False),
    _time("created_at"),
)

# Execution concurrency (concurrency/). Caps on active executions per project (domain '')
# and per project/domain. Config and operator values are kept apart: the live controller
# writes the config ones when it takes the lead, `sluice concurrency caps set` the operator
# ones; the effective cap is operator ?? config.
concurrency_caps = sa.Table(
    "concurrency_caps",
    metadata,
    _name("project", primary_key=True),
    _name("domain", primary_key=True),
    sa.Column("config_max", sa.Integer),
    sa.Column("operator_max", sa.Integer),
    _time("updated_at"),
)

# The controller's fencing token: a new leader bumps `epoch`, and every decision transaction
# updates this row only if the epoch is still its own, so a deposed leader cannot act.
concurrency_leader = sa.Table(
    "concurrency_leader",
    metadata,
    _name("name", 64, primary_key=True),
    sa.Column("epoch", sa.Integer, nullable=False),
    _name("holder", 200, nullable=False),
    _time("acquired_at"),
    _time("heartbeat_at"),
)

# Resource manager (resources/backends/sql/). Holders, waiters and usage counters carry
# project and domain as columns, so scope counts are exact: project "foo" never counts tokens of
# "foobar". Quota sources are kept apart; the effective one is operator ?? config ?? plugin ??
# default (the default a lock claim brings, kept so `quota ls` can show it).
resource_quotas = sa.Table(
    "resource_quotas",
    metadata,
    _name("namespace", 512, primary_key=True),
    sa.Column("plugin_quota", sa.Integer),
    sa.Column("config_quota", sa.Integer),
    sa.Column("operator_quota", sa.Integer),
    sa.Column("default_quota", sa.Integer),
    _time("updated_at"),
)

# Units in use per scope, so an allocation reads three counters instead of summing holders.
# Per namespace: ('', '') is the global count, (project, '') a project's, (project, domain) a
# project/domain's. Project and domain are never empty, so the rows cannot collide.
resource_usage = sa.Table(
    "resource_usage",
    metadata,
    _name("namespace", 512, primary_key=True),
    _name("project", primary_key=True),
    _name("domain", primary_key=True),
    sa.Column("in_use", sa.Integer, nullable=False),
)

resource_holders = sa.Table(
    "resource_holders",
    metadata,
    _name("namespace", 512, primary_key=True),
    _name("token", 512, primary_key=True),
    _name("project", nullable=False),
    _name("domain", nullable=False),
    _name("execution_id", 64, nullable=False, server_default=""),
    _name("node_id", nullable=False, server_default=""),
    sa.Column("units", sa.Integer, nullable=False),
    _time("granted_at"),
    _time("lease_expires_at"),
    sa.Index("ix_resource_holders_lease", "lease_expires_at"),
)

# Priority preemption (migration 0011): the priority of holdings in namespaces where
# preemption is on, and the mark a preempter leaves on its victims. A mark counts only while
# the holding it was written for lives (same token and granted_at).
resource_holder_marks = sa.Table(
    "resource_holder_marks",
    metadata,
    _name("namespace", 512, primary_key=True),
    _name("token", 512, primary_key=True),
    _time("granted_at"),
    sa.Column("priority", sa.Integer, nullable=False),
    _name("preempted_by", 512, nullable=True),
    _name("preempter_execution", 64, nullable=False, server_default=""),
    _name("preempter_node", nullable=False, server_default=""),
    sa.Column("preempter_priority", sa.Integer, nullable=False, server_default="0"),
)

# The operator's preemption flags (`sluice quota set NAME N --preempt`).
resource_preempt_flags = sa.Table(
    "resource_preempt_flags",
    metadata,
    _name("namespace", 512, primary_key=True),
)

# A waiter keeps its caps so that older waiters can be judged when a newcomer asks.
resource_waiters = sa.Table(
    "resource_waiters",
    metadata,
    _name("namespace", 512, primary_key=True),
    _name("token", 512, primary_key=True),
    _name("project", nullable=False),
    _name("domain", nullable=False),
    _name("execution_id", 64, nullable=False, server_default=""),
    _name("node_id", nullable=False, server_default=""),
    sa.Column("units", sa.Integer, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
    sa.Column("project_cap", sa.Integer),
    sa.Column("domain_cap", sa.Integer),
    _time("first_requested_at"),
    _time("expires_at"),
    _name("blocking_scope", 32, nullable=False, server_default=""),
    sa.Index("ix_resource_waiters_order", "namespace", "first_requested_at"),
    sa.Index("ix_resource_waiters_expires", "expires_at"),
)

# Task cache and serialized reservations (cache/).
cache_entries = sa.Table(
    "cache_entries",
    metadata,
    _name("key", 128, primary_key=True),
    _name("task_name", nullable=False),
    _name("cache_version", 128, nullable=False),
    sa.Column("outputs", JSONText, nullable=False),
    _time("created_at"),
    _name("execution_id", 64, nullable=False, server_default=""),
    _name("node_id", nullable=False, server_default=""),
    sa.Index("ix_cache_entries_task_name", "task_name"),  # `sluice cache ls|rm --task`
)

# created_at: when the current owner acquired the key (kept while it extends).
cache_reservations = sa.Table(
    "cache_reservations",
    metadata,
    _name("key", 128, primary_key=True),
    _name("owner_id", 400, nullable=False),
    sa.Column("heartbeat_seconds", sa.Double, nullable=False),
    _time("expires_at"),
    _time("created_at"),
    _time("updated_at"),
    sa.Index("ix_cache_reservations_expires_at", "expires_at"),
    sa.Index("ix_cache_reservations_owner_id", "owner_id"),
)

# Task logs (logs/): one row per segment of an attempt's log, the segment's bytes living in
# the log store at `uri`. A writer (one engine's, for one attempt) appends segments numbered
# after the ones already indexed, so an attempt resumed by another engine keeps what the first
# one flushed. `removed`: the segment was rotated out past the attempt's size limit (its
# bytes and lines say how much went); `dropped_lines`: lines never written while this
# segment was open (the writer's buffer was full). `closed_at` is set once nothing more will
# be appended to the segment.
task_logs = sa.Table(
    "task_logs",
    metadata,
    _name("execution_id", 64, primary_key=True),
    _name("node_id", primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("segment", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("uri", sa.Text, nullable=False),
    _name("writer", 200, nullable=False, server_default=""),
    sa.Column("bytes", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("lines", sa.Integer, nullable=False, server_default="0"),
    sa.Column("dropped_lines", sa.Integer, nullable=False, server_default="0"),
    sa.Column("removed", sa.Integer, nullable=False, server_default="0"),
    _time("first_at", True),
    _time("last_at", True),
    _time("closed_at", True),
)

# HTTP API bearer tokens (service/tokens.py). Only a hash of each secret is kept; `projects`
# is the JSON list of projects the token sees and acts on.
api_tokens = sa.Table(
    "api_tokens",
    metadata,
    _name("id", 32, primary_key=True),
    _name("name", nullable=False, server_default=""),
    _name("secret_hash", 64, nullable=False),
    sa.Column("projects", JSONText, nullable=False),
    sa.Column("read_only", sa.Boolean, nullable=False),
    _time("created_at"),
    _time("revoked_at", True),
)

# Idempotent creation (executions/idempotency.py): a caller's key, per project, and a hash of
# the request it came with, written in the same transaction as the execution it created, so
# neither exists without the other. A key is live until `expires_at`; after that it may be
# taken again.
idempotency_keys = sa.Table(
    "idempotency_keys",
    metadata,
    _name("project", primary_key=True),
    _name("key", primary_key=True),
    _name("request_hash", 64, nullable=False),
    _name("execution_id", 64, nullable=False),
    _time("created_at"),
    _time("expires_at"),
    sa.Index("ix_idempotency_keys_expires", "expires_at"),
)

# Backfills (executions/backfills.py): one row per backfill, and one per schedule slot it
# runs, planned when it is created; an execution with the slot's deterministic id is created
# for each slot as the backfill's cap allows. State: RUNNING, PAUSED, CANCELLED, DONE.
backfills = sa.Table(
    "backfills",
    metadata,
    _name("id", 64, primary_key=True),
    _name("project", nullable=False),
    _name("domain", nullable=False),
    _name("launch_plan", nullable=False),
    _name("launch_plan_version", 128, nullable=False),
    _time("start_at"),
    _time("end_at"),
    _name("reprocess", 16, nullable=False),
    sa.Column("max_active", sa.Integer, nullable=False),
    _name("state", 16, nullable=False),
    sa.Column("slots", sa.Integer, nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    _time("created_at"),
    _time("updated_at"),
    sa.Index("ix_backfills_state", "state"),
)

backfill_slots = sa.Table(
    "backfill_slots",
    metadata,
    _name("backfill_id", 64, primary_key=True),
    sa.Column("slot_at", sa.Double, primary_key=True, autoincrement=False),
    sa.Column("generation", sa.Integer, nullable=False),
    _name("execution_id", 64, nullable=False),
)

# Keyed rate limits (resources/backends/ratelimit_sql.py). A rule per (name, source); the GCRA
# state of each (name, key) that is not idle (an idle key's row equals no row, so the sweeper
# drops it); a ticket per (name, key, token): a waiter's place in line (`granted` false,
# ordered by `since` then token) or a grant remembered for a repeated ask (`granted` true).
rate_limits = sa.Table(
    "rate_limits",
    metadata,
    _name("name", 200, primary_key=True),
    _name("source", 16, primary_key=True),
    _name("rate", 64, nullable=False),
    sa.Column("emission_interval", sa.Double, nullable=False),
    sa.Column("burst", sa.Integer, nullable=False),
    _time("updated_at"),
)

rate_limit_state = sa.Table(
    "rate_limit_state",
    metadata,
    _name("name", 200, primary_key=True),
    _name("key", 255, primary_key=True),
    _time("tat"),
    sa.Index("ix_rate_limit_state_tat", "tat"),
)

rate_limit_tickets = sa.Table(
    "rate_limit_tickets",
    metadata,
    _name("name", 200, primary_key=True),
    _name("key", 255, primary_key=True),
    _name("token", 512, primary_key=True),
    sa.Column("granted", sa.Boolean, nullable=False),
    sa.Column("units", sa.Integer, nullable=False),
    _time("since"),
    _time("expires_at"),
    _name("execution_id", 64, nullable=False, server_default=""),
    _name("node_id", nullable=False, server_default=""),
    sa.Index("ix_rate_limit_tickets_order", "name", "key", "since"),
    sa.Index("ix_rate_limit_tickets_expires", "expires_at"),
)

# Flyte entities registered through the flyteadmin gRPC endpoint (flyteadmin/, service/flyte/):
# each task, workflow and launch plan spec as the client sent it (flyteidl protobuf bytes),
# with the digest that makes a re-registration of the same version a no-op and a different
# spec under it an error. `state` is a launch plan version's ACTIVE/INACTIVE (Flyte's).
flyte_entities = sa.Table(
    "flyte_entities",
    metadata,
    _name("resource_type", 16, primary_key=True),
    _name("project", primary_key=True),
    _name("domain", primary_key=True),
    _name("name", primary_key=True),
    _name("version", 128, primary_key=True),
    _name("digest", 64, nullable=False),
    sa.Column("spec", sa.LargeBinary, nullable=False),
    _name("state", 16, nullable=True),
    _time("created_at"),
    _time("updated_at"),
)
