//! `moat-e2e-fake-cli`: the fixture replayer of tools/cli-fixture, built in
//! this crate so its tests find it (`CARGO_BIN_EXE_moat-e2e-fake-cli`).

fn main() -> anyhow::Result<()> {
    moat_cli_fixture::fake::main()
}
