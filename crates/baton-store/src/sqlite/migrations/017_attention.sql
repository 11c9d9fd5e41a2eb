-- The human queue reads the work still open, not every need, verdict and order
-- there ever was: `baton queue`, `status` and the board call it often.
--
-- The needs no one acknowledged yet, each with the seq of its event.
CREATE TABLE open_needs (
    id  TEXT    PRIMARY KEY,
    seq INTEGER NOT NULL
) WITHOUT ROWID;
-- The orders with a staged effect that failed or started with no recorded end.
CREATE TABLE stuck_orders (
    id TEXT PRIMARY KEY
) WITHOUT ROWID;
-- The orders open as recorded, oldest first: as many entries as orders are open.
CREATE INDEX orders_open ON orders (log_seq)
    WHERE status NOT IN ('approved', 'declined', 'expired', 'cancelled');
