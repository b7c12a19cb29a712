//! The `devcell` binary: all work happens in the library (`devcell::cli::main`).

fn main() -> std::process::ExitCode {
    devcell::cli::main()
}
