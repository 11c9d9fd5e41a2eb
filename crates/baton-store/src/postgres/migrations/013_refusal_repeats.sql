-- The repeats counted on each security event: the same refusal again within a minute of
-- the event is counted here rather than appended (`authority::repeat_of`). Not a
-- projection: the log does not hold repeats (a refused client would flood it), so a
-- rebuild keeps this table.
CREATE TABLE refusal_repeats (
    project BIGINT NOT NULL,
    seq     BIGINT NOT NULL,
    count   BIGINT NOT NULL,
    last_at BIGINT NOT NULL,
    PRIMARY KEY (project, seq)
);
