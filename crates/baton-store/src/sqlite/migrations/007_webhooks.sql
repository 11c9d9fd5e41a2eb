-- Webhooks: the projection of `webhook.changed` (participant, url, secret, the event that
-- set it) and, beside it, the server's delivery bookkeeping that the log does not hold:
-- the cursor (what concerns the participant after it is pending), failures in a row,
-- when to try next, the lease of the server delivering it, the last outcome.
CREATE TABLE webhooks (
    participant  TEXT    PRIMARY KEY,
    url          TEXT    NOT NULL,
    secret       TEXT    NOT NULL,
    set_seq      INTEGER NOT NULL,
    cursor       INTEGER NOT NULL,
    failures     INTEGER NOT NULL DEFAULT 0,
    next_at      INTEGER NOT NULL DEFAULT 0,
    lease_until  INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    delivered_at INTEGER
);
