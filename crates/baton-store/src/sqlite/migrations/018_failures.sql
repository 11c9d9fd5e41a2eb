-- The failures lane reads the runs that failed or were lost within its window,
-- and for each only the successes that could clear it (a later one of the same command or
-- for the same order), not every run that ended in the window.
CREATE INDEX runs_failed ON runs (ended_at) WHERE status IN ('failed', 'lost');
CREATE INDEX runs_done_command ON runs (json_extract(data, '$.command'), ended_at)
    WHERE status = 'done';
CREATE INDEX runs_done_order ON runs (json_extract(data, '$.order'), ended_at)
    WHERE status = 'done';
