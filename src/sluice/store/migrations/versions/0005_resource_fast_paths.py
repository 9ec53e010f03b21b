"""resource manager fast paths on PostgreSQL: one call, one commit per uncontended operation

Revision ID: 0005
Revises: 0004

With the functions of 0002, an allocation and a release are each a pipelined transaction of
two round trips (BEGIN and the load, then the writes and COMMIT), because the admission rule
runs in Python between them. When nobody waits in the namespaces involved, no lease there
has lapsed and the token holds none of them, the rule needs no waiter at all: a claim is
granted if it fits the quota and its two caps, three comparisons. These functions take that
case in one statement, run in autocommit (one round trip, one commit): they lock the
namespaces as 0002's functions do, and either do the whole operation or return NULL having
written nothing, and the caller runs the general path (sluice/resources/backends/sql/
pg_direct.py). They decide nothing the general path would decide differently.
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# Must match _LOCK_CLASS in sluice/resources/backends/sql/writes.py.
_LOCK_CLASS = 0x5175

_FUNCTIONS = [
    # Grant a claim on every namespace when nobody waits there, no lease lapsed there and the
    # token holds none of them, and every claim fits its effective quota (operator ?? config
    # ?? plugin ?? the claim's default ?? the stored default) and its caps. Returns each
    # namespace's units in use after the grant, or NULL (nothing written) for the general
    # path, which also reports an unknown namespace or a claim larger than its quota.
    f"""
CREATE OR REPLACE FUNCTION sluice_resources_try_grant(
    p_keys integer[], p_names text[], p_units integer[], p_defaults integer[],
    p_project_caps integer[], p_domain_caps integer[], p_token text, p_project text,
    p_domain text, p_execution_id text, p_node_id text, p_now double precision,
    p_expiry double precision
) RETURNS integer[] LANGUAGE plpgsql AS $$
DECLARE
    k integer;
    quota integer;
    total integer;
    by_project integer;
    by_domain integer;
    totals integer[] := '{{}}';
BEGIN
    FOREACH k IN ARRAY p_keys LOOP
        PERFORM pg_advisory_xact_lock({_LOCK_CLASS}, k);
    END LOOP;
    IF EXISTS (SELECT 1 FROM resource_waiters WHERE namespace = ANY(p_names))
       OR EXISTS (SELECT 1 FROM resource_holders
                  WHERE namespace = ANY(p_names) AND token = p_token)
       OR EXISTS (SELECT 1 FROM resource_holders
                  WHERE namespace = ANY(p_names) AND lease_expires_at <= p_now) THEN
        RETURN NULL;
    END IF;
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
                               AND domain = p_domain), 0) END
        INTO quota, total, by_project, by_domain
        FROM (SELECT 1) AS one LEFT JOIN resource_quotas AS q ON q.namespace = p_names[i];
        IF quota IS NULL OR total + p_units[i] > quota
           OR by_project + p_units[i] > p_project_caps[i]
           OR by_domain + p_units[i] > p_domain_caps[i] THEN
            RETURN NULL;
        END IF;
        totals := totals || (total + p_units[i]);
    END LOOP;
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
    RETURN totals;
END $$
""",
    # Release a token's holders when nobody waits in any of the namespaces (so there is no
    # waiter entry of the token to drop and nobody to rank): drop and uncount them, forget
    # namespaces left with nothing but a claim's default, and, with an origin, NOTIFY the
    # other processes (ready unknown: anyone may ask) as the general path does. Returns
    # [[namespace, units in use], ...] where units were freed, or NULL (nothing written)
    # where someone waits.
    f"""
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
""",
]

_NAMES = [
    "sluice_resources_try_release(integer[], text, text[], text, text, text)",
    "sluice_resources_try_grant(integer[], text[], integer[], integer[], integer[], integer[], "
    "text, text, text, text, text, double precision, double precision)",
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
