-- Webhooks: the projection of `webhook.changed` (participant, url, secret, the event that
-- set it) and, beside it, the servers' delivery bookkeeping that the log does not hold:
-- the cursor (what concerns the participant after it is pending), failures in a row,
-- when to try next, the lease of the server delivering it, the last outcome. Servers
-- claim a due webhook with `FOR UPDATE SKIP LOCKED`.
CREATE TABLE webhooks (
    project      BIGINT NOT NULL,
    participant  TEXT   NOT NULL,
    url          TEXT   NOT NULL,
    secret       TEXT   NOT NULL,
    set_seq      BIGINT NOT NULL,
    cursor       BIGINT NOT NULL,
    failures     BIGINT NOT NULL DEFAULT 0,
    next_at      BIGINT NOT NULL DEFAULT 0,
    lease_until  BIGINT NOT NULL DEFAULT 0,
    last_error   TEXT,
    delivered_at BIGINT,
    PRIMARY KEY (project, participant)
);
CREATE INDEX webhooks_due ON webhooks (project, next_at);
