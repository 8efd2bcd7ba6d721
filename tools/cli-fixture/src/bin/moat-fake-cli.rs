//! `moat-fake-cli`: replays a recorded CLI run (see
//! `moat_cli_fixture::fake`).

fn main() -> anyhow::Result<()> {
    moat_cli_fixture::fake::main()
}
