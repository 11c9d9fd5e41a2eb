//! `baton demo`: placeholder replaced below.
use crate::error::CommandResult;
use crate::output::Output;
use clap::Args;
#[derive(Args, Debug)]
pub struct DemoArgs {}
pub async fn run(_args: DemoArgs) -> CommandResult<Output> {
    todo!()
}
