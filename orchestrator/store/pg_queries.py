"""Every SQL statement of the PostgreSQL store, by name (the schema is in ``pg_migrations/``).

Statements that differ from SQLite's only in their placeholders are SQLite's,
``numbered``. Bulk operations pass arrays (``unnest``) rather than one placeholder
per row, so each statement's text is the same whatever the batch size: asyncpg
prepares a statement once per connection and reuses it from its cache from then on.

Rows another transaction may be writing are locked in tracking_id order
(``FOR NO KEY UPDATE`` under ``ORDER BY``) before a bulk update, so that a
renewal and a batch of poll results of the same replica never deadlock.
"""

from __future__ import annotations

import functools
import itertools
import re

from orchestrator.store import queries
from orchestrator.store.queries import DELIVERY_COLUMNS, T_COLUMNS, TRACKING_COLUMNS

# The database's clock, in unix seconds: every lease is judged by it, never by a
# replica's own clock, so replicas whose clocks disagree still agree on leases.
NOW = "extract(epoch FROM clock_timestamp())::float8"
# Taken before any seq is assigned and held to commit: seq order is commit order.
EVENTS_LOCK_KEY = 0x6F7263685F657674  # "orch_evt"
MIGRATION_LOCK_KEY = 0x6F7263685F6D6967  # "orch_mig"
CHANNEL = "orchestrator"  # LISTEN/NOTIFY: payload "work", "events" or "sinks"

# Where CLAIM's two extra columns (the new lease token, the previous owner) start.
CLAIM_TOKEN = len(TRACKING_COLUMNS.split(","))
# Resuming (and claiming) skips a body its digest stands for, as the SQLite store does.
T_COLUMNS_ACTIVE = T_COLUMNS.replace(
    " t.remote,", " CASE WHEN t.remote_digest IS NULL THEN t.remote END,"
)


def numbered(sql: str) -> str:
    """A statement of SQLite's with PostgreSQL's placeholders: each ``?`` in turn as $1, $2..."""
    numbers = itertools.count(1)
    return re.sub(r"\?", lambda _: f"${next(numbers)}", sql)


# -- schema bookkeeping ---------------------------------------------------------------------

CREATE_SCHEMA_VERSION = (
    "CREATE TABLE IF NOT EXISTS schema_version"
    " (version integer PRIMARY KEY, name text NOT NULL, applied_at double precision NOT NULL)"
)
SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM schema_version"
RECORD_MIGRATION = "INSERT INTO schema_version (version, name, applied_at) VALUES ($1, $2, $3)"
# No parameter: asyncpg sends it as one simple query, on any pooled connection. With
# one, a connection's first use adds a prepare round trip, which on a slow link
# alone can take the readiness probe past its bound.
PROBE_WRITE = f"UPDATE store_probe SET at = {NOW} WHERE id = 1"

# -- trackings ------------------------------------------------------------------------------

# New rows are leased to the replica that accepted them: it polls them at once.
INSERT_TRACKINGS = (
    "INSERT INTO trackings (tracking_id, workspace, kind, remote_id, state, polls,"
    " next_poll_at, deadline_at, created_at, labels, correlation_id, callback_url, notify,"
    " deadline_source, remote, work_class, traceparent, tracestate, group_name, lease_owner,"
    " lease_until, lease_token)"
    " SELECT u.tid, u.ws, u.kind, u.rid, 'active', 0, u.npa, u.dl, u.ca, u.labels, u.corr,"
    f" u.cb, u.notify, u.dls, u.remote, u.wc, u.tp, u.ts, u.grp, $18, {NOW} + $19,"
    " nextval('lease_tokens')"
    " FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::float8[], $6::float8[],"
    " $7::float8[], $8::bytea[], $9::text[], $10::text[], $11::text[], $12::text[],"
    " $13::bytea[], $14::text[], $15::text[], $16::text[], $17::text[]) WITH ORDINALITY"
    " AS u(tid, ws, kind, rid, npa, dl, ca, labels, corr, cb, notify, dls, remote, wc, tp, ts,"
    " grp, n)"
    " ORDER BY u.n"
    " ON CONFLICT (workspace, kind, remote_id) DO NOTHING RETURNING tracking_id, lease_token"
)
INSERT_LABELS = (
    "INSERT INTO tracking_labels (tracking_id, key, value)"
    " SELECT * FROM unnest($1::text[], $2::text[], $3::text[])"
)
TRACKINGS_BY_REMOTE = (
    f"SELECT {T_COLUMNS} FROM trackings t"
    " JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(ws, kind, rid)"
    " ON t.workspace = k.ws AND t.kind = k.kind AND t.remote_id = k.rid"
)
TRACKING_BY_ID = f"SELECT {T_COLUMNS} FROM trackings t WHERE t.tracking_id = $1"
ACTIVE_COUNTS = (
    "SELECT workspace, count(*) FROM trackings WHERE state = 'active' GROUP BY workspace"
)
ACTIVE_TRACKINGS = (
    f"SELECT {T_COLUMNS_ACTIVE} FROM trackings t WHERE t.state = 'active' AND t.tracking_id > $1"
    " ORDER BY t.tracking_id LIMIT $2"
)

_POLL_ARRAYS = (
    "unnest($1::text[], $2::int[], $3::float8[], $4::float8[], $5::bytea[], $6::bool[],"
    " $7::text[], $8::bytea[], $9::text[], $10::bytea[], $11::text[], $12::float8[],"
    " $13::float8[], $14::text[], $15::bigint[])"
    " AS u(id, polls, lpa, npa, err, changed, rs, remote, fp, dg, wc, wst, dl, dls, tok)"
)
# Poll results, fenced: only the holder of the current, unexpired lease writes. A
# derived deadline (dl, dls) and the work's class and start (wc, wst) are written with
# them, fenced alike (NULL: unchanged).
_RECORD_POLLS_ROWS = (
    f"a AS (SELECT * FROM {_POLL_ARRAYS}),"
    " u AS (SELECT a.* FROM trackings t JOIN a ON t.tracking_id = a.id"
    f"   WHERE t.state = 'active' AND t.lease_token = a.tok AND t.lease_until >= {NOW}"
    "   ORDER BY t.tracking_id FOR NO KEY UPDATE OF t)"
)
_RECORD_POLLS = (
    "UPDATE trackings t SET polls = u.polls, last_polled_at = u.lpa, next_poll_at = u.npa,"
    " last_error = u.err,"
    " remote_status = CASE WHEN u.changed THEN u.rs ELSE t.remote_status END,"
    " remote = CASE WHEN u.changed THEN u.remote ELSE t.remote END,"
    " remote_fingerprint = CASE WHEN u.changed THEN u.fp ELSE t.remote_fingerprint END,"
    " remote_digest = CASE WHEN u.changed THEN u.dg ELSE t.remote_digest END,"
    " deadline_at = coalesce(u.dl, t.deadline_at),"
    " deadline_source = CASE WHEN u.dl IS NULL THEN t.deadline_source ELSE u.dls END,"
    " work_class = coalesce(u.wc, t.work_class),"
    " work_started_at = coalesce(u.wst, t.work_started_at)"
    " FROM u WHERE t.tracking_id = u.id RETURNING t.tracking_id"
)
RECORD_POLLS = f"WITH {_RECORD_POLLS_ROWS} {_RECORD_POLLS}"

# Terminal writes, together: a holder's fenced like a poll result (tok: its lease
# token); a caller's abandon (tok NULL) accepted from any replica, as it is no stale
# poller's write. Rows are locked in one order, as RECORD_POLLS does.
_FINISH_ROWS = (
    "f AS (SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::bytea[],"
    " $5::int[], $6::float8[], $7::bytea[], $8::bool[], $9::text[], $10::bytea[], $11::bigint[])"
    " AS f(id, outcome, at, result, polls, lpa, err, changed, rs, remote, tok)),"
    " u AS (SELECT f.* FROM trackings t JOIN f ON t.tracking_id = f.id WHERE t.state = 'active'"
    f"   AND (f.tok IS NULL OR (t.lease_token = f.tok AND t.lease_until >= {NOW}))"
    "   ORDER BY t.tracking_id FOR NO KEY UPDATE OF t)"
)
_FINISH = (
    "UPDATE trackings t SET state = 'terminal', outcome = u.outcome, terminal_at = u.at,"
    " result = u.result, next_poll_at = NULL, polls = coalesce(u.polls, t.polls),"
    " last_polled_at = coalesce(u.lpa, t.last_polled_at),"
    " last_error = CASE WHEN u.polls IS NOT NULL THEN u.err ELSE coalesce(u.err, t.last_error) END,"
    " remote_status = CASE WHEN u.changed THEN u.rs ELSE t.remote_status END,"
    " remote = CASE WHEN u.changed THEN u.remote ELSE t.remote END,"
    " lease_owner = NULL, lease_until = 0"
    " FROM u WHERE t.tracking_id = u.id"
    " RETURNING t.tracking_id, t.group_name, u.outcome, u.at"
)


def _append_events(first: int, source: str = "", where: str = "") -> str:
    """The CTEs that append events in the order given with their deliveries and raise
    the high-water mark: ``ev`` (seq, event_id, time of each), ``d`` and ``hi``.
    Parameters from ``$first`` are the event and delivery arrays (INSERT_EVENTS's);
    ``source`` and ``where`` narrow the events taken."""
    ev = ", ".join(
        f"${first + i}::{t}[]"
        for i, t in enumerate(("text", "text", "text", "float8", "bytea", "bool", "text"))
    )
    dl = ", ".join(f"${first + 7 + i}::text[]" for i in range(3))
    return (
        "ev AS (INSERT INTO events (event_id, tracking_id, type, time, payload, terminal, sink)"
        " SELECT e.id, e.tid, e.type, e.time, e.payload, e.terminal, e.sink"
        f" FROM {source}unnest({ev})"
        f" WITH ORDINALITY AS e(id, tid, type, time, payload, terminal, sink, n){where}"
        " ORDER BY e.n RETURNING seq, event_id, time),"
        " d AS (INSERT INTO deliveries (event_seq, destination, url, state, attempts,"
        " next_attempt_at, created_at) SELECT ev.seq, x.dest, x.url, 'pending', 0, ev.time, ev.time"
        f" FROM unnest({dl}) AS x(eid, dest, url) JOIN ev ON ev.event_id = x.eid),"
        " hi AS (UPDATE event_seq_high SET seq = greatest(seq, (SELECT max(seq) FROM ev))"
        " WHERE id = 1)"
    )


def _with_events(rows: str, write: str, first: int, returning: str = "w.tracking_id") -> str:
    """``write`` (an UPDATE after the CTEs ``rows``, returning the trackings it moved) and, in
    the same statement, the events of the trackings it moved (``_append_events`` from
    ``$first``). One statement, so no row lock or the log's lock is held across a round
    trip. The log's lock is taken after the rows' (it reads all of w first) and held to
    commit: seq order is commit order."""
    moved = " WHERE e.tid IN (SELECT tracking_id FROM w)"
    return (
        f"WITH {rows}, w AS ({write}),"
        f" l AS (SELECT pg_advisory_xact_lock({EVENTS_LOCK_KEY}) FROM (SELECT count(*) FROM w) c),"
        f" {_append_events(first, 'l, ', moved)},"
        f" n AS (SELECT pg_notify('{CHANNEL}', 'events') FROM (SELECT 1 FROM ev LIMIT 1) one)"
        f" SELECT {returning}, (SELECT count(*) FROM n) FROM w"
    )


# Each moved tracking with its group, outcome and end (a group's counts follow).
FINISH = _with_events(_FINISH_ROWS, _FINISH, 12, "w.tracking_id, w.group_name, w.outcome, w.at")
RECORD_POLLS_EVENTS = _with_events(_RECORD_POLLS_ROWS, _RECORD_POLLS, 16)


@functools.lru_cache(maxsize=256)
def list_trackings(present: tuple[bool, ...], labels: int, after: bool) -> str:
    """The listing query, as SQLite's (the set of texts is small: each is prepared once)."""
    return numbered(queries.list_trackings(present, labels, after))


# Up to $2 settled terminal trackings (their events and deliveries follow through ON
# DELETE CASCADE) and up to $2 settled operational events, by age; returns how many.
PRUNE = (
    f"WITH doomed AS ({numbered(queries.PRUNABLE_TRACKINGS)} FOR UPDATE SKIP LOCKED),"
    " gone AS (DELETE FROM trackings WHERE tracking_id IN (SELECT tracking_id FROM doomed)"
    "   RETURNING 1),"
    f" ops AS ({numbered(queries.PRUNABLE_SINK_EVENTS)} FOR UPDATE SKIP LOCKED),"
    " ops_gone AS (DELETE FROM events WHERE seq IN (SELECT seq FROM ops) RETURNING 1)"
    " SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM ops_gone)"
)

# -- leases ---------------------------------------------------------------------------------

# Active rows whose lease ran out (or was released), soonest due first; rows another
# replica is claiming at this moment are skipped, not waited for.
CLAIM = (
    "WITH picked AS (SELECT tracking_id, lease_owner AS prev FROM trackings"
    f" WHERE state = 'active' AND lease_until < {NOW}"
    " ORDER BY next_poll_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
    f" UPDATE trackings t SET lease_owner = $1, lease_until = {NOW} + $3,"
    " lease_token = nextval('lease_tokens')"
    " FROM picked WHERE t.tracking_id = picked.tracking_id"
    f" RETURNING {T_COLUMNS_ACTIVE}, t.lease_token, picked.prev"
)
# The rows still held, checked and locked in one CTE; the update joins the table to it
# by primary key alone. A second CTE join (``IN (SELECT ... FROM locked)``) was planned
# as a nested loop over both, quadratic: 17 s to renew 10,000 leases, past the bound.
_HELD = (
    "WITH a AS (SELECT * FROM unnest($1::text[], $2::bigint[]) AS a(id, tok)),"
    " b AS (SELECT a.id FROM trackings t"
    "   JOIN a ON t.tracking_id = a.id AND t.lease_token = a.tok WHERE t.state = 'active'"
)
# The leases renewed and the heartbeat in one statement, one round trip: on a database
# answering in hundreds of milliseconds a renewal must land well within its bound. The
# statement's snapshot does not see its own upsert, so this replica comes from the
# upsert itself, with the ids it renewed.
RENEW = (
    f"{_HELD} AND t.lease_until >= {NOW} ORDER BY t.tracking_id FOR NO KEY UPDATE OF t),"
    f" r AS (UPDATE trackings t SET lease_until = {NOW} + $3 FROM b"
    " WHERE t.tracking_id = b.id RETURNING t.tracking_id),"
    " hb AS (INSERT INTO replicas (replica_id, started_at, seen_at, leases)"
    f" VALUES ($4, {NOW}, {NOW}, $5)"
    f" ON CONFLICT (replica_id) DO UPDATE SET seen_at = {NOW}, leases = $5"
    " RETURNING replica_id, seen_at)"
    " SELECT replica_id, seen_at, (SELECT array_agg(tracking_id) FROM r) FROM hb"
    " UNION ALL SELECT replica_id, seen_at, NULL::text[] FROM replicas"
    f" WHERE seen_at >= {NOW} - $3 AND replica_id <> $4 ORDER BY replica_id"
)
# Why a renewal missed these leases: each row's state and holder (RENEW returns only
# what it renewed; asked only when it missed some).
LEASE_STATES = (
    "SELECT tracking_id, state, lease_owner FROM trackings WHERE tracking_id = ANY($1::text[])"
)
# Claimable at once ($3 = 0), or $3 seconds from now (a hand-over: see engine/replica.py).
# One statement (no lock held across a round trip); idle replicas are told on commit.
RELEASE = (
    f"{_HELD} ORDER BY t.tracking_id FOR NO KEY UPDATE OF t),"
    " r AS (UPDATE trackings t SET lease_owner = NULL,"
    f" lease_until = CASE WHEN $3::float8 > 0 THEN {NOW} + $3 ELSE 0 END FROM b"
    " WHERE t.tracking_id = b.id)"
    f" SELECT pg_notify('{CHANNEL}', 'work')"
)
# At start-up: whatever an earlier process of the same replica id still held.
RELEASE_OWNER = (
    "UPDATE trackings SET lease_owner = NULL, lease_until = 0"
    " WHERE lease_owner = $1 AND state = 'active'"
)
FORGET_REPLICAS = f"DELETE FROM replicas WHERE replica_id = $1 OR seen_at < {NOW} - 86400"
NOTIFY = "SELECT pg_notify($1, $2)"

# -- events ---------------------------------------------------------------------------------

LOCK_EVENTS = f"SELECT pg_advisory_xact_lock({EVENTS_LOCK_KEY})"
# Events appended together in the order given (seq follows the arrays' order), each
# with its deliveries (x: event id, destination, URL); the high-water mark raised and
# the other replicas told, both on commit. One round trip for any number of events.
INSERT_EVENTS = (
    f"WITH {_append_events(1)} SELECT max(seq), pg_notify('{CHANNEL}', 'events') FROM ev"
)
EVENTS_AFTER = numbered(queries.EVENTS_AFTER)
LAST_EVENT_SEQ = "SELECT seq FROM event_seq_high WHERE id = 1"

# -- deliveries -----------------------------------------------------------------------------

# Oldest first; a delivery another replica is claiming is skipped, not waited for. A
# sink one replica disabled gets nothing from any replica from its commit on, even
# before the others have heard of it.
CLAIM_DELIVERIES = (
    "WITH due AS (SELECT delivery_id, next_attempt_at AS was FROM deliveries"
    " WHERE destination = $1 AND state = 'pending' AND next_attempt_at <= $2"
    " AND NOT EXISTS (SELECT 1 FROM disabled_sinks s WHERE s.destination = $1)"
    " ORDER BY next_attempt_at, delivery_id LIMIT $3 FOR UPDATE SKIP LOCKED),"
    " leased AS (UPDATE deliveries d SET next_attempt_at = $4 FROM due"
    "   WHERE d.delivery_id = due.delivery_id RETURNING d.*, due.was)"
    f" SELECT {DELIVERY_COLUMNS} FROM leased d JOIN events e ON e.seq = d.event_seq"
    " ORDER BY d.was, d.delivery_id"
)
DELIVERY_BY_ID = numbered(queries.DELIVERY_BY_ID)
DELIVERIES_BY_STATE = numbered(queries.DELIVERIES_BY_STATE)
DELIVERIES_ALL = numbered(queries.DELIVERIES_ALL)
MARK_DELIVERED = numbered(queries.MARK_DELIVERED)
MARK_RETRY = numbered(queries.MARK_RETRY)
MARK_DEAD = numbered(queries.MARK_DEAD)
REDRIVE_DELIVERY = numbered(queries.REDRIVE_DELIVERY)
REPLAY_DELIVERIES = numbered(queries.REPLAY_DELIVERIES)
PENDING_COUNTS = numbered(queries.PENDING_COUNTS)

# -- sinks ----------------------------------------------------------------------------------

DISABLE_SINK = numbered(queries.DISABLE_SINK)
ENABLE_SINK = numbered(queries.ENABLE_SINK)
DISABLED_SINKS = numbered(queries.DISABLED_SINKS)

# -- adaptive polling's work classes ---------------------------------------------------------

SAVE_WORK_CLASSES = (
    "INSERT INTO work_classes (workspace, kind, work_class, summary, updated_at)"
    " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::float8[])"
    " ON CONFLICT (workspace, kind, work_class)"
    " DO UPDATE SET summary = excluded.summary, updated_at = excluded.updated_at"
)
# Locks every row of a merge (inserting an empty one where there is none yet), in the
# order given, and returns what is stored: '' marks a row this statement created.
LOCK_WORK_CLASSES = (
    "INSERT INTO work_classes (workspace, kind, work_class, summary, updated_at)"
    " SELECT w, k, c, ''::bytea, u"
    " FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[]) AS n(w, k, c, u)"
    " ON CONFLICT (workspace, kind, work_class) DO UPDATE SET updated_at = work_classes.updated_at"
    " RETURNING workspace, kind, work_class, summary"
)
FORGET_WORK_CLASSES = (
    "DELETE FROM work_classes WHERE (workspace, kind, work_class) IN"
    " (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))"
)
WORK_CLASSES = numbered(queries.WORK_CLASSES)
