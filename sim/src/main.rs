//! `coordsim`: the command line of the coordsim simulator.

mod allocator;
mod cli;

#[global_allocator]
static ALLOCATOR: allocator::Mimalloc = allocator::Mimalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
