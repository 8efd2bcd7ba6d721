//! The `moat` command. All logic lives in the `cli` module: it parses
//! arguments, calls the library and renders events.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
