-- Reservations: the projection of `reservation.changed`, one row per reservation (a glob a
-- participant holds). `prefix` is the glob's fixed leading components: overlap lookups
-- narrow by it before the core decides. `expires_at` is the newest reservation or
-- renewal's time plus its time to live (an order's: its deadline), as the log says;
-- whether a row is live is decided when it is read, against the reader's clock.
CREATE TABLE reservations (
    id          TEXT    PRIMARY KEY,
    seq         INTEGER NOT NULL,   -- the event that made it
    holder      TEXT    NOT NULL,
    path        TEXT    NOT NULL,
    prefix      TEXT    NOT NULL,
    exclusive   INTEGER NOT NULL,
    reason      TEXT    NOT NULL,
    order_id    TEXT,
    reserved_at INTEGER NOT NULL,
    renewed_at  INTEGER NOT NULL,
    expires_at  INTEGER,
    released_at INTEGER,
    released_by TEXT,
    forced      TEXT
);
CREATE INDEX reservations_open ON reservations (prefix) WHERE released_at IS NULL;
CREATE INDEX reservations_seq ON reservations (seq);
CREATE INDEX reservations_holder ON reservations (holder, seq);
CREATE INDEX reservations_order ON reservations (order_id) WHERE order_id IS NOT NULL;
