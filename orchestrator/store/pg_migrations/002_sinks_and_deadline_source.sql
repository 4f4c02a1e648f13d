-- Main's store caught up (SQLite's 004_sink_events and 005_deadline_source).
--
-- Operational events (a sink disabled or enabled) belong to no tracking: the event
-- log's tracking_id becomes optional, and `sink` names the destination such an
-- event is about (a replay to that sink leaves it out). Exactly one of the two is
-- set; every row 001 wrote has a tracking and no sink, so the check holds for them.
ALTER TABLE events ALTER COLUMN tracking_id DROP NOT NULL;
ALTER TABLE events ADD COLUMN sink text;
ALTER TABLE events ADD CONSTRAINT events_tracking_or_sink
    CHECK ((tracking_id IS NULL) <> (sink IS NULL));
-- Retention finds the settled operational events by age.
CREATE INDEX events_operational ON events (time) WHERE tracking_id IS NULL;

-- Sinks that are disabled (a 410, or no success for events.disable_after_s) until
-- POST /v1/sinks/{name}/enable: a restart keeps them disabled.
CREATE TABLE disabled_sinks (
    destination text PRIMARY KEY,
    since       double precision NOT NULL,
    reason      text NOT NULL
);

-- Which rule set a tracking's deadline_at: caller, derived (a function job's, from
-- the job's own timeout and retries) or default. Rows stored before keep NULL:
-- unknown, and never derived again (their deadline may be a caller's).
ALTER TABLE trackings ADD COLUMN deadline_source text;
