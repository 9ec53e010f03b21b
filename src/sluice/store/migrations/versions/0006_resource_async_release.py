"""resource manager on PostgreSQL: releases commit without waiting for their WAL flush; a
woken waiter's grant in one call

Revision ID: 0006
Revises: 0005

A release need not wait for its WAL flush. `sluice_resources_try_release` now sets
`synchronous_commit = off` for its own transaction (`set_config(..., true)`: the setting ends
with the transaction), so its commit returns once the commit record is in the WAL buffers.
Why that is safe, and why nothing else here does it:

- What a server crash can lose is a release acknowledged in the last few hundred
  milliseconds (at most three `wal_writer_delay`s). Its holder row then comes back with the
  lease it had: the units stay counted until that lease lapses and the next allocation there
  (or the sweeper) reclaims them. Units are withheld for a while, never granted twice.
- No grant can survive a crash that loses the release whose units it took. WAL is one
  ordered stream: the release's commit record is written before its transaction becomes
  visible, so a grant that saw the units freed writes its own commit record after it, and a
  grant is a synchronous commit, which flushes the WAL up to its record and so the release's
  too. The same holds for a standby under synchronous replication (it confirms LSNs, in
  order).
- A grant stays synchronous: a lost grant would let the units go to someone else while the
  holder it was reported to runs. So does a lease renewal: a lost renewal could let the
  lease lapse early and the units be re-granted while their holder still runs.

`sluice_resources_try_grant_waiter` is the woken waiter's grant (the hand-off) in one call:
`sluice_resources_try_grant` declines whenever anyone waits, so a waiter took the general
path (two round trips). This one takes the case where the asker is the first in line in
every namespace of its claim: it has a live waiter entry there, nobody ranks ahead of it, no
lease lapsed, it holds none of them, and the claim fits. The fair-order rule then sets no
room aside for anyone, so the verdict is the three comparisons of the newcomer's fast path.
It grants and drops the asker's waiter entries, or returns NULLs having written nothing
(the general path then decides, as before).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# Must match _LOCK_CLASS in sluice/resources/backends/sql/writes.py.
_LOCK_CLASS = 0x5175

_TRY_RELEASE = f"""
CREATE OR REPLACE FUNCTION sluice_resources_try_release(
    p_keys integer[], p_token text, p_names text[], p_channel text, p_prefix text,
    p_origin text
) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    k integer;
    changed text[];
    totals integer[];
    spent boolean;
    usage json;
BEGIN
    FOREACH k IN ARRAY p_keys LOOP
        PERFORM pg_advisory_xact_lock({_LOCK_CLASS}, k);
    END LOOP;
    IF EXISTS (SELECT 1 FROM resource_waiters WHERE namespace = ANY(p_names)) THEN
        RETURN NULL;
    END IF;
    -- A release may be lost in a server crash, never over-granted (see migration 0006):
    -- its commit does not wait for the WAL flush. Local: it ends with this transaction.
    PERFORM set_config('synchronous_commit', 'off', true);
    WITH gone AS (
        DELETE FROM resource_holders WHERE namespace = ANY(p_names) AND token = p_token
        RETURNING namespace, project, domain, units
    ), counted AS (
        INSERT INTO resource_usage AS u (namespace, project, domain, in_use)
        SELECT g.namespace, s.project, s.domain, -g.units
        FROM gone AS g,
             LATERAL (VALUES ('', ''), (g.project, ''), (g.project, g.domain))
                 AS s(project, domain)
        ON CONFLICT (namespace, project, domain) DO UPDATE
        SET in_use = u.in_use + excluded.in_use
        RETURNING u.namespace, u.project, u.domain, u.in_use
    )
    SELECT coalesce(array_agg(namespace::text) FILTER (WHERE project = '' AND domain = ''),
                    '{{}}'),
           coalesce(array_agg(in_use) FILTER (WHERE project = '' AND domain = ''), '{{}}'),
           coalesce(bool_or(in_use <= 0), false)
    INTO changed, totals, spent
    FROM counted;
    IF cardinality(changed) = 0 THEN
        RETURN '[]'::json;
    END IF;
    IF spent THEN
        DELETE FROM resource_usage WHERE namespace = ANY(changed) AND in_use <= 0;
    END IF;
    DELETE FROM resource_quotas q
    WHERE q.namespace = ANY(changed)
      AND q.operator_quota IS NULL AND q.config_quota IS NULL AND q.plugin_quota IS NULL
      AND NOT EXISTS (SELECT 1 FROM resource_holders h WHERE h.namespace = q.namespace);
    SELECT json_agg(json_build_array(c.ns, greatest(c.in_use, 0))) INTO usage
    FROM unnest(changed, totals) AS c(ns, in_use);
    IF p_origin IS NOT NULL THEN
        PERFORM pg_notify(p_channel, p_prefix || json_build_object(
            'origin', p_origin,
            'wake', (SELECT json_agg(json_build_array(c.ns, NULL)) FROM unnest(changed) AS c(ns))
        )::text);
    END IF;
    RETURN usage;
END $$
"""

# The first in line's grant. Returns each namespace's units in use after it (`totals`), the
# live waiters left there (`waiting`) and the asker's first refusal time (`since`), or NULLs
# (nothing written) for the general path. Ranked ahead, conservatively: any other waiter
# (live or lapsed) refused before the asker, or at the same moment with a priority as high
# (ties are decided by the token in Python's order: left to the general path).
_TRY_GRANT_WAITER = f"""
CREATE OR REPLACE FUNCTION sluice_resources_try_grant_waiter(
    p_keys integer[], p_names text[], p_units integer[], p_defaults integer[],
    p_project_caps integer[], p_domain_caps integer[], p_token text, p_project text,
    p_domain text, p_execution_id text, p_node_id text, p_priority integer,
    p_now double precision, p_expiry double precision,
    OUT totals integer[], OUT waiting integer[], OUT since double precision
) LANGUAGE plpgsql AS $$
DECLARE
    k integer;
    live boolean;
    quota integer;
    total integer;
    by_project integer;
    by_domain integer;
    left_waiting integer;
BEGIN
    FOREACH k IN ARRAY p_keys LOOP
        PERFORM pg_advisory_xact_lock({_LOCK_CLASS}, k);
    END LOOP;
    SELECT min(w.first_requested_at), bool_and(w.expires_at > p_now) INTO since, live
    FROM resource_waiters AS w WHERE w.namespace = ANY(p_names) AND w.token = p_token;
    IF since IS NULL OR NOT live
       OR EXISTS (SELECT 1 FROM resource_waiters AS w
                  WHERE w.namespace = ANY(p_names) AND w.token <> p_token
                    AND (w.first_requested_at < since
                         OR (w.first_requested_at = since AND w.priority >= p_priority)))
       OR EXISTS (SELECT 1 FROM resource_holders
                  WHERE namespace = ANY(p_names) AND token = p_token)
       OR EXISTS (SELECT 1 FROM resource_holders
                  WHERE namespace = ANY(p_names) AND lease_expires_at <= p_now) THEN
        since := NULL;
        RETURN;
    END IF;
    totals := '{{}}';
    waiting := '{{}}';
    FOR i IN 1 .. cardinality(p_names) LOOP
        SELECT coalesce(q.operator_quota, q.config_quota, q.plugin_quota, p_defaults[i],
                        q.default_quota),
               coalesce((SELECT in_use FROM resource_usage
                         WHERE namespace = p_names[i] AND project = '' AND domain = ''), 0),
               CASE WHEN p_project_caps[i] IS NOT NULL THEN
                   coalesce((SELECT in_use FROM resource_usage
                             WHERE namespace = p_names[i] AND project = p_project
                               AND domain = ''), 0) END,
               CASE WHEN p_domain_caps[i] IS NOT NULL THEN
                   coalesce((SELECT in_use FROM resource_usage
                             WHERE namespace = p_names[i] AND project = p_project
                               AND domain = p_domain), 0) END,
               (SELECT count(*) FROM resource_waiters AS w
                WHERE w.namespace = p_names[i] AND w.token <> p_token AND w.expires_at > p_now)
        INTO quota, total, by_project, by_domain, left_waiting
        FROM (SELECT 1) AS one LEFT JOIN resource_quotas AS q ON q.namespace = p_names[i];
        IF quota IS NULL OR total + p_units[i] > quota
           OR by_project + p_units[i] > p_project_caps[i]
           OR by_domain + p_units[i] > p_domain_caps[i] THEN
            totals := NULL;
            waiting := NULL;
            since := NULL;
            RETURN;
        END IF;
        totals := totals || (total + p_units[i]);
        waiting := waiting || left_waiting;
    END LOOP;
    DELETE FROM resource_waiters WHERE namespace = ANY(p_names) AND token = p_token;
    INSERT INTO resource_holders (namespace, token, project, domain, execution_id, node_id,
                                  units, granted_at, lease_expires_at)
    SELECT c.ns, p_token, p_project, p_domain, p_execution_id, p_node_id, c.units, p_now,
           p_expiry
    FROM unnest(p_names, p_units) AS c(ns, units);
    INSERT INTO resource_usage AS u (namespace, project, domain, in_use)
    SELECT c.ns, s.project, s.domain, c.units
    FROM unnest(p_names, p_units) AS c(ns, units),
         (VALUES ('', ''), (p_project, ''), (p_project, p_domain)) AS s(project, domain)
    ON CONFLICT (namespace, project, domain) DO UPDATE SET in_use = u.in_use + excluded.in_use;
    IF EXISTS (SELECT 1 FROM unnest(p_defaults) AS d WHERE d IS NOT NULL) THEN
        INSERT INTO resource_quotas AS r (namespace, default_quota, updated_at)
        SELECT c.ns, c.quota, p_now FROM unnest(p_names, p_defaults) AS c(ns, quota)
        WHERE c.quota IS NOT NULL
        ON CONFLICT (namespace) DO UPDATE
        SET default_quota = EXCLUDED.default_quota, updated_at = EXCLUDED.updated_at
        WHERE r.default_quota IS DISTINCT FROM EXCLUDED.default_quota;
    END IF;
END $$
"""

_TRY_GRANT_WAITER_NAME = (
    "sluice_resources_try_grant_waiter(integer[], text[], integer[], integer[], integer[], "
    "integer[], text, text, text, text, text, integer, double precision, double precision)"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_TRY_RELEASE)
    op.execute(_TRY_GRANT_WAITER)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP FUNCTION IF EXISTS {_TRY_GRANT_WAITER_NAME}")
    op.execute(_previous_try_release())


def _previous_try_release() -> str:
    """0005's definition of sluice_resources_try_release (synchronous commit)."""
    path = Path(__file__).with_name("0005_resource_fast_paths.py")
    spec = importlib.util.spec_from_file_location("sluice_migration_0005", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (definition,) = [f for f in module._FUNCTIONS if "sluice_resources_try_release(" in f]
    return str(definition)
