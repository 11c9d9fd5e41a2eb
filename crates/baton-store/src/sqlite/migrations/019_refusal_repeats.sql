-- The repeats counted on each security event: the same refusal again within a minute of
-- the event is counted here rather than appended (`authority::repeat_of`). Not a
-- projection: the log does not hold repeats (a refused client would flood it), so a
-- rebuild keeps this table.
CREATE TABLE refusal_repeats (
    seq     INTEGER PRIMARY KEY,
    count   INTEGER NOT NULL,
    last_at INTEGER NOT NULL
) WITHOUT ROWID;
