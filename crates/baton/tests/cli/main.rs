//! End-to-end tests of the `baton` binary, all in one test binary: each module drives
//! real `baton` processes against a throwaway project.

mod common;

mod a2a;
mod a2a_js;
mod after;
mod agents;
mod awl_conformance;
mod board;
mod commands;
mod concurrency;
mod conformance;
mod crash;
mod demo;
mod differential;
mod docs;
mod failover;
mod gateway;
mod hostile;
mod interrupt;
mod ledger;
mod mcp;
mod mcp_js;
mod memory;
mod negotiate;
mod node;
mod orders;
mod pools;
mod portable;
mod queue;
mod race;
mod readme;
mod real_agents;
mod remote;
mod replicas;
mod reservations;
mod review;
mod server;
