-- Each key's last recorded use (`baton key list`'s "last used"). Not a projection: the
-- log does not hold uses (a write per request would flood it), so a rebuild keeps this
-- table. Recorded at most once a minute per key (`baton_core::key::USE_RECORDED_EVERY`).
CREATE TABLE key_uses (
    project BIGINT NOT NULL,
    id      TEXT   NOT NULL,
    used_at BIGINT NOT NULL,
    PRIMARY KEY (project, id)
);
