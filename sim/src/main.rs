//! `coordsim`: the command line of the coordsim simulator.

mod cli;

/// A seed run allocates and frees many small values (messages, trace events, disk
/// buffers); glibc's allocator spent about a quarter of a sweep's CPU time on them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
