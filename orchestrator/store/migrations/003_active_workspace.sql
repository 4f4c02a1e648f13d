-- A restart counts the active trackings of each workspace before loading them (it
-- plans their first reads from the counts): with the workspace in the index of
-- active rows, that count reads the index alone (45 ms for 100,000 here, against
-- 170-370 ms through the table).
DROP INDEX trackings_active;
CREATE INDEX trackings_active ON trackings (tracking_id, workspace) WHERE state = 'active';
