-- Orders that wait on orders (`baton_core::after`): one row for each order an order still
-- waits on, the projection of `order.changed` (`baton_core::after::edits`): added when the
-- order is offered with an `after`, removed when the order waited on is approved, when the
-- waiting order is released, goes on without it, or ends. `message_id` is the request that
-- carries the waiting order: its worker's inbox leaves it out while any row names it.
-- An order's readiness is its `orders.status` (`offered`), read by `orders_status`.
CREATE TABLE order_waits (
    project    BIGINT NOT NULL,
    order_id   TEXT   NOT NULL,
    after_id   TEXT   NOT NULL,
    message_id TEXT   NOT NULL,
    PRIMARY KEY (project, order_id, after_id)
);
CREATE INDEX order_waits_after ON order_waits (project, after_id);
CREATE INDEX order_waits_message ON order_waits (project, message_id);
CREATE INDEX orders_status ON orders (project, status, log_seq);
