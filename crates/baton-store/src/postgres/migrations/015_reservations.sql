-- Reservations: the projection of `reservation.changed`, one row per reservation (a glob a
-- participant holds). `prefix` is the glob's fixed leading components: overlap lookups
-- narrow by it before the core decides, bytewise (`COLLATE "C"`, so a range of prefixes
-- is the same range in every locale). `expires_at` is the newest reservation or renewal's
-- time plus its time to live (an order's: its deadline), as the log says; whether a row
-- is live is decided when it is read, against the reader's clock.
CREATE TABLE reservations (
    project     BIGINT  NOT NULL,
    id          TEXT    NOT NULL,
    seq         BIGINT  NOT NULL,   -- the event that made it
    holder      TEXT    NOT NULL,
    path        TEXT    NOT NULL,
    prefix      TEXT    COLLATE "C" NOT NULL,
    exclusive   BIGINT  NOT NULL,
    reason      TEXT    NOT NULL,
    order_id    TEXT,
    reserved_at BIGINT  NOT NULL,
    renewed_at  BIGINT  NOT NULL,
    expires_at  BIGINT,
    released_at BIGINT,
    released_by TEXT,
    forced      TEXT,
    PRIMARY KEY (project, id)
);
CREATE INDEX reservations_open ON reservations (project, prefix) WHERE released_at IS NULL;
CREATE INDEX reservations_seq ON reservations (project, seq);
CREATE INDEX reservations_holder ON reservations (project, holder, seq);
CREATE INDEX reservations_order ON reservations (project, order_id) WHERE order_id IS NOT NULL;
