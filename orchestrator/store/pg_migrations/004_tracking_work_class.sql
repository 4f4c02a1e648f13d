-- As SQLite's 007_tracking_work_class: a tracking's work class (a function key, a
-- build kind) and when that work began, so that a resumed or taken-over tracking is
-- planned as before. NULL: not known (yet), and for rows stored before.
ALTER TABLE trackings ADD COLUMN work_class text;
ALTER TABLE trackings ADD COLUMN work_started_at double precision;
