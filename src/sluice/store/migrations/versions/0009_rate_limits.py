"""keyed rate limits: rules, GCRA state per key, tickets; on PostgreSQL one function per
admission

Revision ID: 0009
Revises: 0008

`rate_limits` holds each limit's rule per source (operator, config, plugin); `rate_limit_state`
the GCRA theoretical arrival time of each (name, key) that is not idle; `rate_limit_tickets`
each token's place in a key's line, or its grant remembered for a repeated ask.

`sluice_ratelimit_admit` is one admission, all claims or none, in one statement (one round
trip, one transaction), judged on the server's clock (`clock_timestamp()`) unless a test
clock's time is passed. It locks the state rows of its keys in (name, key) order, so two
admissions sharing keys never deadlock, then reads under those locks (each statement of the
function takes a new snapshot, so it sees what the previous lock holder committed). The rule
is `sluice.resources.ratelimit.gcra` (EPSILON and LATE_WAITER_RETRY must match it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_ADMIT = """
CREATE OR REPLACE FUNCTION sluice_ratelimit_admit(
    p_names text[], p_keys text[], p_units integer[], p_token text, p_execution text,
    p_node text, p_now double precision, p_remember double precision,
    p_recheck double precision, p_grace double precision
) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    t double precision := COALESCE(
        p_now, extract(epoch FROM clock_timestamp())::double precision);
    n integer := array_length(p_names, 1);
    i integer;
    r record;
    rates text[] := array_fill(''::text, ARRAY[n]);
    steps double precision[] := array_fill(0::double precision, ARRAY[n]);
    bursts integer[] := array_fill(0, ARRAY[n]);
    tats double precision[] := array_fill(0::double precision, ARRAY[n]);
    held boolean[] := array_fill(false, ARRAY[n]);
    starts double precision[] := array_fill(0::double precision, ARRAY[n]);
    v_tat double precision;
    v_since double precision := NULL;
    v_ahead integer;
    v_units integer;
    v_slot double precision;
    v_start double precision;
    all_now boolean := true;
    any_new boolean := false;
    next_at double precision := NULL;
    worst integer := 1;
    worst_ahead integer := -1;
    expiry double precision;
BEGIN
    FOR i IN 1..n LOOP
        SELECT rate, emission_interval, burst INTO r FROM rate_limits WHERE name = p_names[i]
        ORDER BY CASE source WHEN 'operator' THEN 0 WHEN 'config' THEN 1 ELSE 2 END LIMIT 1;
        IF NOT FOUND THEN
            RETURN json_build_object('unknown', p_names[i]);
        END IF;
        IF p_units[i] > r.burst THEN
            RETURN json_build_object('too_big', p_names[i], 'units', p_units[i],
                                     'burst', r.burst, 'rate', r.rate);
        END IF;
        rates[i] := r.rate; steps[i] := r.emission_interval; bursts[i] := r.burst;
    END LOOP;
    FOR i IN SELECT k.i FROM unnest(p_names, p_keys) WITH ORDINALITY AS k(nm, ky, i)
             ORDER BY k.nm COLLATE "C", k.ky COLLATE "C" LOOP
        SELECT tat INTO v_tat FROM rate_limit_state
        WHERE name = p_names[i] AND key = p_keys[i] FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO rate_limit_state (name, key, tat) VALUES (p_names[i], p_keys[i], 0)
            ON CONFLICT DO NOTHING;
            SELECT tat INTO v_tat FROM rate_limit_state
            WHERE name = p_names[i] AND key = p_keys[i] FOR UPDATE;
        END IF;
        tats[i] := v_tat;
        DELETE FROM rate_limit_tickets
        WHERE name = p_names[i] AND key = p_keys[i] AND expires_at <= t;
    END LOOP;
    FOR i IN 1..n LOOP
        SELECT granted, since INTO r FROM rate_limit_tickets
        WHERE name = p_names[i] AND key = p_keys[i] AND token = p_token;
        IF FOUND AND r.granted THEN
            held[i] := true;
        ELSE
            any_new := true;
            IF FOUND THEN
                v_since := LEAST(COALESCE(v_since, r.since), r.since);
            END IF;
        END IF;
    END LOOP;
    IF NOT any_new THEN
        RETURN json_build_object('granted', true, 'repeated', true, 'now', t);
    END IF;
    v_since := COALESCE(v_since, t);
    FOR i IN 1..n LOOP
        IF held[i] THEN CONTINUE; END IF;
        SELECT count(*), COALESCE(sum(units), 0) INTO v_ahead, v_units FROM rate_limit_tickets
        WHERE name = p_names[i] AND key = p_keys[i] AND NOT granted AND token <> p_token
          AND (since < v_since
               OR (since = v_since AND token COLLATE "C" < p_token COLLATE "C"));
        v_start := LEAST(GREATEST(tats[i], t), t + bursts[i] * steps[i]);
        starts[i] := v_start;
        v_units := v_units + p_units[i];
        IF v_start + v_units * steps[i] - t <= bursts[i] * steps[i] + 1e-9 THEN
            IF v_ahead = 0 THEN
                v_slot := t;
            ELSE
                v_slot := t + LEAST(GREATEST(v_units - p_units[i], 1) * steps[i], 1.0);
            END IF;
        ELSE
            v_slot := v_start + (v_units - bursts[i]) * steps[i];
        END IF;
        all_now := all_now AND v_slot <= t AND v_ahead = 0;
        IF next_at IS NULL OR v_slot > next_at OR (v_slot = next_at AND v_ahead > worst_ahead)
        THEN
            next_at := v_slot; worst := i; worst_ahead := v_ahead;
        END IF;
    END LOOP;
    IF all_now THEN
        FOR i IN 1..n LOOP
            IF held[i] THEN CONTINUE; END IF;
            UPDATE rate_limit_state SET tat = starts[i] + p_units[i] * steps[i]
            WHERE name = p_names[i] AND key = p_keys[i];
            IF p_remember > 0 THEN
                INSERT INTO rate_limit_tickets AS k
                    (name, key, token, granted, units, since, expires_at, execution_id, node_id)
                VALUES (p_names[i], p_keys[i], p_token, true, p_units[i], t, t + p_remember,
                        p_execution, p_node)
                ON CONFLICT (name, key, token) DO UPDATE SET granted = true,
                    units = EXCLUDED.units, since = EXCLUDED.since,
                    expires_at = EXCLUDED.expires_at;
            ELSE
                DELETE FROM rate_limit_tickets
                WHERE name = p_names[i] AND key = p_keys[i] AND token = p_token;
            END IF;
        END LOOP;
        RETURN json_build_object('granted', true, 'repeated', false, 'now', t);
    END IF;
    expiry := LEAST(next_at, t + p_recheck) + p_grace;
    FOR i IN 1..n LOOP
        IF held[i] THEN CONTINUE; END IF;
        INSERT INTO rate_limit_tickets AS k
            (name, key, token, granted, units, since, expires_at, execution_id, node_id)
        VALUES (p_names[i], p_keys[i], p_token, false, p_units[i], v_since, expiry,
                p_execution, p_node)
        ON CONFLICT (name, key, token) DO UPDATE SET units = EXCLUDED.units,
            since = EXCLUDED.since, expires_at = EXCLUDED.expires_at,
            execution_id = EXCLUDED.execution_id, node_id = EXCLUDED.node_id;
    END LOOP;
    RETURN json_build_object('granted', false, 'now', t, 'next_at', next_at,
                             'name', p_names[worst], 'key', p_keys[worst],
                             'position', worst_ahead + 1, 'rate', rates[worst]);
END $$
"""
_ADMIT_NAME = (
    "sluice_ratelimit_admit(text[], text[], integer[], text, text, text, double precision, "
    "double precision, double precision, double precision)"
)


def upgrade() -> None:
    op.create_table(
        "rate_limits",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("rate", sa.String(length=64), nullable=False),
        sa.Column("emission_interval", sa.Double(), nullable=False),
        sa.Column("burst", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("name", "source", name=op.f("pk_rate_limits")),
    )
    op.create_table(
        "rate_limit_state",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("tat", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("name", "key", name=op.f("pk_rate_limit_state")),
    )
    with op.batch_alter_table("rate_limit_state", schema=None) as batch_op:
        batch_op.create_index("ix_rate_limit_state_tat", ["tat"], unique=False)
    op.create_table(
        "rate_limit_tickets",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("token", sa.String(length=512), nullable=False),
        sa.Column("granted", sa.Boolean(), nullable=False),
        sa.Column("units", sa.Integer(), nullable=False),
        sa.Column("since", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.Column("execution_id", sa.String(length=64), server_default="", nullable=False),
        sa.Column("node_id", sa.String(length=255), server_default="", nullable=False),
        sa.PrimaryKeyConstraint("name", "key", "token", name=op.f("pk_rate_limit_tickets")),
    )
    with op.batch_alter_table("rate_limit_tickets", schema=None) as batch_op:
        batch_op.create_index("ix_rate_limit_tickets_order", ["name", "key", "since"], unique=False)
        batch_op.create_index("ix_rate_limit_tickets_expires", ["expires_at"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_ADMIT)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS {_ADMIT_NAME}")
    op.drop_table("rate_limit_tickets")
    op.drop_table("rate_limit_state")
    op.drop_table("rate_limits")
