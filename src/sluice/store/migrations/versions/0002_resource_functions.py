"""resource manager functions on PostgreSQL

Revision ID: 0002
Revises: 0001

The resource backend's hot paths (allocate, release) cost a round trip and a statement's
worth of client work per statement: about 18 statements for an allocate and a release. These
functions do the bookkeeping of each step in one call: lock the namespaces, reclaim lapsed
leases and waiters, drop or add holders and count their units, and read back what the
admission rule (which stays in Python, sluice/resources/admission.py) needs. They hold no
policy: no decision about who is granted is taken here.

SQLite keeps running the same steps as separate statements (sluice/resources/backends/
sql/writes.py and sql/reads.py); this revision changes nothing there.
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Must match _LOCK_CLASS in sluice/resources/backends/sql/writes.py.
_LOCK_CLASS = 0x5175

_FUNCTIONS = [
    # Add `delta` units to the three scope counters of a holder; counters at zero go.
    """
CREATE OR REPLACE FUNCTION sluice_resources_count(
    p_namespace text, p_project text, p_domain text, p_delta integer
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO resource_usage AS u (namespace, project, domain, in_use)
    VALUES (p_namespace, '', '', p_delta),
           (p_namespace, p_project, '', p_delta),
           (p_namespace, p_project, p_domain, p_delta)
    ON CONFLICT (namespace, project, domain) DO UPDATE SET in_use = u.in_use + excluded.in_use;
    IF p_delta < 0 THEN
        DELETE FROM resource_usage WHERE namespace = p_namespace AND in_use <= 0;
    END IF;
END $$
""",
    # Lock the namespaces (advisory locks, keys already sorted by the caller: one global
    # order), then drop holders (uncounting their units) and waiter entries there: the token's
    # when `p_token` is given, the lapsed ones at `p_lapsed_at` when that is. Returns the
    # namespaces where anything went.
    f"""
CREATE OR REPLACE FUNCTION sluice_resources_lock_and_drop(
    p_keys integer[], p_names text[], p_token text, p_lapsed_at double precision
) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    k integer;
    r record;
    dropped text[] := '{{}}';
    left_queue text[];
BEGIN
    FOREACH k IN ARRAY p_keys LOOP
        PERFORM pg_advisory_xact_lock({_LOCK_CLASS}, k);
    END LOOP;
    FOR r IN DELETE FROM resource_holders
             WHERE namespace = ANY(p_names)
               AND (p_token IS NULL OR token = p_token)
               AND (p_lapsed_at IS NULL OR lease_expires_at <= p_lapsed_at)
             RETURNING namespace, project, domain, units LOOP
        PERFORM sluice_resources_count(r.namespace, r.project, r.domain, -r.units);
        dropped := dropped || r.namespace::text;
    END LOOP;
    WITH gone AS (
        DELETE FROM resource_waiters
        WHERE namespace = ANY(p_names)
          AND (p_token IS NULL OR token = p_token)
          AND (p_lapsed_at IS NULL OR expires_at <= p_lapsed_at)
        RETURNING namespace
    )
    SELECT coalesce(array_agg(namespace::text), '{{}}') INTO left_queue FROM gone;
    RETURN dropped || left_queue;
END $$
""",
    # Live waiters of some namespaces, as JSON rows in the column order the caller reads.
    """
CREATE OR REPLACE FUNCTION sluice_resources_waiters(p_names text[], p_live_at double precision)
RETURNS json LANGUAGE sql STABLE AS $$
    SELECT coalesce(json_agg(json_build_array(
        namespace, token, project, domain, execution_id, node_id, units, priority,
        project_cap, domain_cap, first_requested_at, expires_at, blocking_scope)), '[]')
    FROM resource_waiters
    WHERE namespace = ANY(p_names) AND (p_live_at IS NULL OR expires_at > p_live_at)
$$
""",
    # Quota sources and scope counters of some namespaces, as JSON rows.
    """
CREATE OR REPLACE FUNCTION sluice_resources_state(p_names text[]) RETURNS json
LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'sources', (SELECT coalesce(json_agg(json_build_array(
                        namespace, operator_quota, config_quota, plugin_quota, default_quota)),
                    '[]')
                    FROM resource_quotas WHERE namespace = ANY(p_names)),
        'usage', (SELECT coalesce(json_agg(json_build_array(namespace, project, domain, in_use)),
                  '[]')
                  FROM resource_usage WHERE namespace = ANY(p_names)))
$$
""",
    # An allocation's first step: lock, reclaim what lapsed, and read everything the
    # admission rule needs about the claimed namespaces.
    """
CREATE OR REPLACE FUNCTION sluice_resources_load(
    p_keys integer[], p_names text[], p_token text, p_now double precision
) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    reclaimed text[];
    state json;
BEGIN
    reclaimed := sluice_resources_lock_and_drop(p_keys, p_names, NULL, p_now);
    state := sluice_resources_state(p_names);
    RETURN json_build_object(
        'reclaimed', reclaimed,
        'sources', state -> 'sources',
        'usage', state -> 'usage',
        'held', (SELECT coalesce(json_agg(namespace), '[]') FROM resource_holders
                 WHERE token = p_token AND namespace = ANY(p_names)),
        'waiters', sluice_resources_waiters(p_names, NULL));
END $$
""",
    # A grant's writes: the new holders, their units, and the token's waiter entries gone.
    """
CREATE OR REPLACE FUNCTION sluice_resources_grant(
    p_token text, p_project text, p_domain text, p_execution_id text, p_node_id text,
    p_names text[], p_units integer[], p_now double precision, p_expiry double precision,
    p_waited_in text[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO resource_holders (namespace, token, project, domain, execution_id, node_id,
                                  units, granted_at, lease_expires_at)
    SELECT c.ns, p_token, p_project, p_domain, p_execution_id, p_node_id, c.units, p_now,
           p_expiry
    FROM unnest(p_names, p_units) AS c(ns, units);
    FOR i IN 1 .. coalesce(array_length(p_names, 1), 0) LOOP
        PERFORM sluice_resources_count(p_names[i], p_project, p_domain, p_units[i]);
    END LOOP;
    IF cardinality(p_waited_in) > 0 THEN
        DELETE FROM resource_waiters WHERE token = p_token AND namespace = ANY(p_waited_in);
    END IF;
END $$
""",
    # A release: drop the token's holders (uncounting them) and waiter entries, forget
    # namespaces left with nothing but a claim's default, and read what the caller needs to
    # find the waiters now ready where anything changed.
    """
CREATE OR REPLACE FUNCTION sluice_resources_release(
    p_keys integer[], p_token text, p_names text[], p_now double precision
) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    changed text[];
    state json;
BEGIN
    changed := sluice_resources_lock_and_drop(p_keys, p_names, p_token, NULL);
    IF cardinality(changed) = 0 THEN
        RETURN json_build_object('changed', '[]'::json);
    END IF;
    state := sluice_resources_state(changed);
    DELETE FROM resource_quotas q
    WHERE q.namespace = ANY(changed)
      AND q.operator_quota IS NULL AND q.config_quota IS NULL AND q.plugin_quota IS NULL
      AND NOT EXISTS (SELECT 1 FROM resource_holders h WHERE h.namespace = q.namespace)
      AND NOT EXISTS (SELECT 1 FROM resource_waiters w WHERE w.namespace = q.namespace);
    RETURN json_build_object(
        'changed', to_json(changed),
        'sources', state -> 'sources',
        'usage', state -> 'usage',
        'waiters', sluice_resources_waiters(changed, p_now));
END $$
""",
]

_NAMES = [
    "sluice_resources_release(integer[], text, text[], double precision)",
    "sluice_resources_grant(text, text, text, text, text, text[], integer[], double precision, "
    "double precision, text[])",
    "sluice_resources_load(integer[], text[], text, double precision)",
    "sluice_resources_state(text[])",
    "sluice_resources_waiters(text[], double precision)",
    "sluice_resources_lock_and_drop(integer[], text[], text, double precision)",
    "sluice_resources_count(text, text, text, integer)",
]


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for function in _FUNCTIONS:
        op.execute(function)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name in _NAMES:
        op.execute(f"DROP FUNCTION IF EXISTS {name}")
