-- A session's helpers are counted from their parent: the resume packet counts the
-- helpers of a participant's sessions without reading every recent row.
CREATE INDEX runs_parent ON runs (project, ((data::jsonb) ->> 'parent'));
