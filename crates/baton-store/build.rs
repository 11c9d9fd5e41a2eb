//! Sets `cfg(baton_test_postgres)` where the PostgreSQL tests can run (`baton-testdb`).

fn main() {
    baton_testdb::build_script();
}
