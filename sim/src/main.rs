//! `coordsim`: the command line of the coordsim simulator.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
