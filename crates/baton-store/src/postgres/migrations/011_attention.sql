-- The human queue reads the work still open, not every need, verdict and order
-- there ever was: `baton queue`, `status` and the board call it often.
--
-- The needs no one acknowledged yet, each with the seq of its event.
CREATE TABLE open_needs (
    project BIGINT NOT NULL,
    id      TEXT   NOT NULL,
    seq     BIGINT NOT NULL,
    PRIMARY KEY (project, id)
);
-- The orders with a staged effect that failed or started with no recorded end.
CREATE TABLE stuck_orders (
    project BIGINT NOT NULL,
    id      TEXT   NOT NULL,
    PRIMARY KEY (project, id)
);
-- The orders open as recorded, oldest first: as many entries as orders are open.
CREATE INDEX orders_open ON orders (project, log_seq)
    WHERE status NOT IN ('approved', 'declined', 'expired', 'cancelled');
