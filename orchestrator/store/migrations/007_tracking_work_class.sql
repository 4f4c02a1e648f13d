-- Adaptive polling's view of one tracking: its work's class (a function key, a build
-- kind) and when that work began (its own CreatedAt), so that a resumed tracking is
-- planned as it was before the restart, not read by the backoff until a read shows
-- the class again. NULL: not known (yet), and for rows stored before.
ALTER TABLE trackings ADD COLUMN work_class TEXT;
ALTER TABLE trackings ADD COLUMN work_started_at REAL;
