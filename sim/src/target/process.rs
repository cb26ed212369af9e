//! The Claude Code CLI as a child process: a fresh scratch home, workspace and temp
//! directory per run, an environment that points it at the loopback API host and
//! nowhere else, and a wall-clock timeout.
//!
//! The CLI runs headless (`-p`) with `--allowedTools "Agent Task Read"`: as root it
//! refuses `--dangerously-skip-permissions`, and these are the tools the scenarios
//! use. `--output-format stream-json --verbose` makes its stdout one JSON event per
//! line, kept as part of the observation.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The tools the CLI may use without asking.
pub const ALLOWED_TOOLS: &str = "Agent Task Read";

/// The API key the CLI is given: the host only checks that one is sent.
pub const DUMMY_API_KEY: &str = "sk-ant-coordsim-dummy";

/// How often a running process is polled for its exit.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// The directories one run of the CLI owns, removed when this value drops.
#[derive(Debug)]
pub struct Scratch {
    root: tempfile::TempDir,
}

impl Scratch {
    /// Fresh, empty `home/`, `workspace/`, `tmp/` and `outside/` under a new temp
    /// directory.
    pub fn new() -> io::Result<Self> {
        let root = tempfile::Builder::new()
            .prefix("coordsim-claude-code-")
            .tempdir()?;
        for dir in ["home", "workspace", "tmp", super::plant::OUTSIDE_DIR] {
            std::fs::create_dir(root.path().join(dir))?;
        }
        Ok(Self { root })
    }

    /// The directory holding the three.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The id of the session the CLI saved under the scratch home (the newest
    /// transcript directly under `.claude/projects/<cwd slug>/`), for `--resume`.
    pub fn session_id(&self) -> Option<String> {
        let projects = std::fs::read_dir(self.home().join(".claude/projects")).ok()?;
        let mut sessions: Vec<(std::time::SystemTime, String)> = projects
            .flatten()
            .filter_map(|project| std::fs::read_dir(project.path()).ok())
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let id = name.strip_suffix(".jsonl")?.to_owned();
                let modified = entry.metadata().ok()?.modified().ok()?;
                Some((modified, id))
            })
            .collect();
        sessions.sort();
        sessions.pop().map(|(_, id)| id)
    }

    /// The scratch `HOME`.
    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    /// The working directory the CLI runs in.
    pub fn workspace(&self) -> PathBuf {
        self.root.path().join("workspace")
    }

    /// The scratch `TMPDIR`.
    pub fn tmp(&self) -> PathBuf {
        self.root.path().join("tmp")
    }

    /// A directory outside everything the CLI is given, where a planted symlink
    /// points ([`super::plant`]).
    pub fn outside(&self) -> PathBuf {
        self.root.path().join(super::plant::OUTSIDE_DIR)
    }
}

/// How one process run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEnd {
    /// The exit code, if the process exited (not killed by a signal).
    pub exit_code: Option<i32>,
    /// Whether the timeout killed it.
    pub timed_out: bool,
    /// Whether a fault killed it (SIGKILL at a chosen request).
    pub killed_by_fault: bool,
    /// What it wrote to stdout.
    pub stdout: String,
    /// What it wrote to stderr.
    pub stderr: String,
    /// How long it ran.
    pub wall: Duration,
}

/// Runs `claude_bin -p prompt` (then `resume`'s `--resume SESSION`) in `scratch`,
/// talking to `base_url`, for at most `timeout`; SIGKILLs it sooner once `kill_now`
/// says so (polled every 20 ms).
pub fn run_cli(
    claude_bin: &Path,
    prompt: &str,
    resume: Option<&str>,
    scratch: &Scratch,
    base_url: &str,
    timeout: Duration,
    kill_now: &dyn Fn() -> bool,
) -> io::Result<ProcessEnd> {
    let started = Instant::now();
    let resume_args: Vec<&str> = resume.map_or_else(Vec::new, |session| vec!["--resume", session]);
    let mut child = Command::new(claude_bin)
        .args(["-p", prompt, "--allowedTools", ALLOWED_TOOLS])
        .args(&resume_args)
        .args(["--output-format", "stream-json", "--verbose"])
        .current_dir(scratch.workspace())
        // Nothing of the caller's environment leaks in: no real key, no config.
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", scratch.home())
        .env("TMPDIR", scratch.tmp())
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", DUMMY_API_KEY)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = started + timeout;
    // Bounded by `deadline`: past it the child is killed and reaped.
    let (status, timed_out, killed_by_fault): (ExitStatus, bool, bool) = loop {
        if let Some(status) = child.try_wait()? {
            break (status, false, false);
        }
        let timed_out = Instant::now() >= deadline;
        let faulted = !timed_out && kill_now();
        if timed_out || faulted {
            // Already exited between the two calls is the only way kill fails here;
            // `Child::kill` is SIGKILL on Unix.
            let _ = child.kill();
            break (child.wait()?, timed_out, faulted);
        }
        std::thread::sleep(POLL_INTERVAL);
    };
    Ok(ProcessEnd {
        exit_code: status.code(),
        timed_out,
        killed_by_fault,
        stdout: joined(stdout),
        stderr: joined(stderr),
        wall: started.elapsed(),
    })
}

/// Reads `pipe` to its end in a thread, so a full pipe never stalls the child.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> Option<JoinHandle<String>> {
    let mut pipe = pipe?;
    Some(std::thread::spawn(move || {
        let mut bytes = Vec::new();
        // A read error ends the output early; what was read is kept.
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    }))
}

fn joined(reader: Option<JoinHandle<String>>) -> String {
    reader
        .map(|handle| handle.join().unwrap_or_default())
        .unwrap_or_default()
}
