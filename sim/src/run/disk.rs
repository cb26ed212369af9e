//! The run's disk: the in-memory disk, or the production disk on a temp directory
//! (`disk = "real"`), set up with the workspace and wired to the fault engine and
//! the trace the same way, and the refusals of what the real disk cannot do.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use coord_runtime::world::{Clock, Disk};

use super::{RunError, RunOptions, VcsSetting, SESSION_DIR, WORKSPACE_DIR};
use crate::fault::{
    FaultBook, PlantableDisk, RuntimeDisk, ScheduledDiskFaults, SymlinkPlanter, SYMLINK_DIR_TARGET,
    SYMLINK_TARGET,
};
use crate::scenario::{
    DiskSetting, Fault, FaultKind, LinkTarget, LoadedScenario, Scenario, WorkspaceFile, WorldKind,
};
use crate::trace::{current_tool_writer, path_into_text, Name, SimEvent, Trace};
use crate::world::{
    init_repository, BackedDisk, Backing, CrashReport, DiskFaultPolicy, DiskOp, DiskWrite, MemDisk,
    MemHostFs, RealOnMemory, RootedGit, RootedRealDisk, TurmoilFsHost,
};

/// Why a scenario cannot run on the disk asked for. Raised before the run starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiskRefusal {
    /// The scenario places a fault the real disk cannot carry out.
    #[error(
        "{}: the real disk cannot run fault kind `{kind}`: {reason}; run it with `--disk memory`",
        scenario.display()
    )]
    FaultKind {
        /// The scenario file.
        scenario: PathBuf,
        /// The refused kind.
        kind: FaultKind,
        /// Why the real disk cannot carry it out.
        reason: &'static str,
    },
    /// The scenario asks for a disk that follows a final symlink, which the
    /// production disk's `O_NOFOLLOW` never does.
    #[error(
        "{}: `disk_honours_nofollow = false` models a filesystem that ignores O_NOFOLLOW, \
         which the real disk cannot be; run it with `--disk memory`",
        scenario.display()
    )]
    FollowsFinalSymlinks {
        /// The scenario file.
        scenario: PathBuf,
    },
    /// `--vcs git` on a disk git cannot reach: the simulated disks live in memory.
    #[error(
        "{}: `--vcs git` needs the real disk, and this run is on the `{disk}` disk; \
         add `--disk real`",
        scenario.display()
    )]
    GitNeedsRealDisk {
        /// The scenario file.
        scenario: PathBuf,
        /// The disk the run is on.
        disk: DiskSetting,
    },
}

/// The disk a run of `scenario` uses: the command line's choice, else the
/// scenario's, else its world's own (turmoil's filesystem on the turmoil world).
pub fn disk_setting(scenario: &Scenario, options: &RunOptions) -> DiskSetting {
    options.disk.or(scenario.settings.disk).unwrap_or(
        match options.world.unwrap_or(scenario.settings.world) {
            WorldKind::Tokio => DiskSetting::Memory,
            WorldKind::Turmoil => DiskSetting::Turmoil,
        },
    )
}

/// The version control a run of `scenario` makes worktrees with: the command
/// line's choice, else the production git on the real disk and the simulated one
/// on every other.
pub fn vcs_setting(scenario: &Scenario, options: &RunOptions) -> VcsSetting {
    options
        .vcs
        .unwrap_or(match disk_setting(scenario, options) {
            DiskSetting::Real => VcsSetting::Git,
            DiskSetting::Memory | DiskSetting::Turmoil | DiskSetting::RealOnMemory => {
                VcsSetting::Sim
            }
        })
}

/// Why `scenario` cannot run under `options`, if it cannot. Swarm mode never draws a
/// kind the disk refuses, so only the scenario's own settings and faults count.
pub fn disk_refusal(scenario: &LoadedScenario, options: &RunOptions) -> Option<DiskRefusal> {
    let spec = &scenario.scenario;
    let disk = disk_setting(spec, options);
    if disk != DiskSetting::Real {
        return (vcs_setting(spec, options) == VcsSetting::Git).then(|| {
            DiskRefusal::GitNeedsRealDisk {
                scenario: scenario.path.clone(),
                disk,
            }
        });
    }
    if !spec.settings.disk_honours_nofollow {
        return Some(DiskRefusal::FollowsFinalSymlinks {
            scenario: scenario.path.clone(),
        });
    }
    spec.faults.iter().find_map(|fault| {
        let kind = fault.kind();
        kind.real_disk_refusal()
            .map(|reason| DiskRefusal::FaultKind {
                scenario: scenario.path.clone(),
                kind,
                reason,
            })
    })
}

/// What a coordinator crash does to the disk's power.
pub(super) enum PowerSupply {
    /// The in-memory disk under the runtime's.
    Memory(MemDisk),
    /// The host that owns turmoil's filesystem.
    Turmoil(Box<TurmoilFsHost>),
    /// The real disk, which refuses coordinator crashes before the run.
    Uncut,
}

impl PowerSupply {
    /// Cuts the power under the disk: what was never synced is lost.
    pub fn cut(&mut self, rng: &mut dyn rand_chacha::rand_core::RngCore) -> CrashReport {
        match self {
            PowerSupply::Memory(mem) => mem.crash(rng),
            PowerSupply::Turmoil(host) => host.crash(),
            PowerSupply::Uncut => {
                unreachable!("the real disk refuses coordinator crashes before the run")
            }
        }
    }
}

/// The disk of one run, as the boot loop needs it.
pub(super) struct RunDisk {
    /// The power under the disk, which a coordinator crash cuts.
    pub power: PowerSupply,
    /// What the runtime gets: the disk with the fault engine's hooks.
    pub runtime: Arc<dyn Disk>,
    /// The same disk, for the fault engine's adapters that plant symlinks at points
    /// of their own (a worktree just made).
    pub planter: Arc<dyn SymlinkPlanter>,
    /// The same disk without the hooks, for the simulator's own reads of what it
    /// holds: a witness's read is no operation of the runtime's, and must neither
    /// meet a fault nor move the fault schedule.
    pub witness: Arc<dyn Disk>,
    /// The production version control on the real disk, in place of the simulated
    /// one: the workspace is a git repository.
    pub git: Option<Arc<RootedGit>>,
}

/// Builds the run's disk on `setting`, with the workspace set up (a git
/// repository when `vcs` is git), every landed write traced, and the fault book's
/// disk faults, crash points and planted symlinks in place.
pub(super) fn build(
    spec: &Scenario,
    setting: DiskSetting,
    vcs: VcsSetting,
    book: &FaultBook,
    clock: Arc<dyn Clock>,
    trace: &Trace,
) -> Result<RunDisk, RunError> {
    let setup = |error: std::io::Error| RunError::Setup(error.to_string());
    let follows_final_symlinks = !spec.settings.disk_honours_nofollow;
    match setting {
        DiskSetting::Memory => {
            let base = MemDisk::default().follow_final_symlinks(follows_final_symlinks);
            let power = PowerSupply::Memory(base.clone());
            wire(base, power, (spec, book), clock, trace).map_err(setup)
        }
        DiskSetting::Turmoil => {
            let host = TurmoilFsHost::new(follows_final_symlinks).map_err(setup)?;
            let base = host.disk().clone();
            let power = PowerSupply::Turmoil(Box::new(host));
            wire(base, power, (spec, book), clock, trace).map_err(setup)
        }
        DiskSetting::RealOnMemory => {
            let mem = MemDisk::default();
            let power = PowerSupply::Memory(mem.clone());
            let base = RealOnMemory::on(MemHostFs::new(mem, !follows_final_symlinks));
            wire(base, power, (spec, book), clock, trace).map_err(setup)
        }
        DiskSetting::Real => {
            // Refused before the run: a bug if it gets here.
            assert!(
                !follows_final_symlinks,
                "the real disk cannot follow final symlinks"
            );
            let base = RootedRealDisk::new().map_err(setup)?;
            let mut disk = wire(base.clone(), PowerSupply::Uncut, (spec, book), clock, trace)
                .map_err(setup)?;
            if vcs == VcsSetting::Git {
                init_repository(&base, Path::new(WORKSPACE_DIR)).map_err(setup)?;
                disk.git = Some(Arc::new(RootedGit::on(base)));
            }
            Ok(disk)
        }
    }
}

/// A disk the simulator can give the runtime: clocked, observed and faulted.
trait SimulatedDisk: PlantableDisk + 'static {
    fn set_clock(&self, clock: Arc<dyn Clock>);
    fn set_observer(&self, observer: Arc<dyn Fn(DiskWrite) + Send + Sync>);
    fn with_policy(self, policy: Arc<Mutex<dyn DiskFaultPolicy>>) -> Self;
}

impl SimulatedDisk for MemDisk {
    fn set_clock(&self, clock: Arc<dyn Clock>) {
        MemDisk::set_clock(self, clock);
    }
    fn set_observer(&self, observer: Arc<dyn Fn(DiskWrite) + Send + Sync>) {
        MemDisk::set_observer(self, observer);
    }
    fn with_policy(self, policy: Arc<Mutex<dyn DiskFaultPolicy>>) -> Self {
        MemDisk::with_policy(self, policy)
    }
}

impl SimulatedDisk for RealOnMemory {
    fn set_clock(&self, clock: Arc<dyn Clock>) {
        self.fs().set_clock(clock);
    }
    fn set_observer(&self, observer: Arc<dyn Fn(DiskWrite) + Send + Sync>) {
        self.fs().set_observer(observer);
    }
    fn with_policy(self, policy: Arc<Mutex<dyn DiskFaultPolicy>>) -> Self {
        RealOnMemory::on(self.fs().with_policy(policy))
    }
}

impl<B: Backing + std::fmt::Debug> SimulatedDisk for BackedDisk<B> {
    fn set_clock(&self, clock: Arc<dyn Clock>) {
        BackedDisk::set_clock(self, clock);
    }
    fn set_observer(&self, observer: Arc<dyn Fn(DiskWrite) + Send + Sync>) {
        BackedDisk::set_observer(self, observer);
    }
    fn with_policy(self, policy: Arc<Mutex<dyn DiskFaultPolicy>>) -> Self {
        BackedDisk::with_policy(self, policy)
    }
}

/// Sets up the workspace and the schedule's symlink victims on `base`, then wires
/// it to the clock, the trace and the fault book: the runtime gets it with the
/// fault hooks, the witnesses without them.
fn wire<D: SimulatedDisk>(
    base: D,
    power: PowerSupply,
    (spec, book): (&Scenario, &FaultBook),
    clock: Arc<dyn Clock>,
    trace: &Trace,
) -> std::io::Result<RunDisk> {
    base.set_clock(clock.clone());
    set_up_workspace(&base, &spec.files)?;
    set_up_symlink_victims(&base, &book.schedule())?;
    base.set_observer(write_observer(trace));
    let policy = Arc::new(Mutex::new(ScheduledDiskFaults::new(book.clone())));
    let runtime = Arc::new(RuntimeDisk::new(
        base.clone().with_policy(policy),
        book.clone(),
        clock,
    ));
    Ok(RunDisk {
        power,
        runtime: runtime.clone(),
        planter: runtime,
        witness: Arc::new(base),
        git: None,
    })
}

/// Pushes every landed write into the trace, for the `no-escape` checker, with the
/// agent whose Write or Edit made it, if a tool did.
fn write_observer(trace: &Trace) -> Arc<dyn Fn(DiskWrite) + Send + Sync> {
    let trace = trace.clone();
    Arc::new(move |write: DiskWrite| {
        let writer = current_tool_writer();
        // Most writes resolve to the path written: its text is decoded once.
        let resolved_as_written = write.resolved_path.as_os_str() == write.path.as_os_str();
        let path = Name::from(path_into_text(write.path));
        let resolved_path = if resolved_as_written {
            path.clone()
        } else {
            Name::from(path_into_text(write.resolved_path))
        };
        trace.push(
            "disk",
            SimEvent::DiskWrite {
                path,
                resolved_path,
                through_symlink: write.through_symlink,
                target_kept: write.op == DiskOp::ReplaceAtomic && write.torn,
                replaced: write.op == DiskOp::ReplaceAtomic,
                agent: writer.as_ref().map(|writer| Name::new(&writer.agent)),
                cwd: writer.map(|writer| Name::new(&writer.cwd)),
            },
        );
    })
}

/// The workspace the workers edit: a repository root with its two built-in files
/// and the scenario's `files`, all durable.
fn set_up_workspace(disk: &dyn Disk, files: &[WorkspaceFile]) -> std::io::Result<()> {
    let workspace = Path::new(WORKSPACE_DIR);
    disk.create_dir_all(workspace.join("shared").as_path())?;
    disk.create_new(workspace.join("shared/notes.md").as_path(), b"notes\n")?;
    disk.create_new(workspace.join("README.md").as_path(), b"workspace\n")?;
    disk.create_dir_all(Path::new(SESSION_DIR))?;
    disk.sync_file(workspace.join("shared/notes.md").as_path())?;
    disk.sync_file(workspace.join("README.md").as_path())?;
    disk.sync_file(workspace.join("shared").as_path())?;
    for file in files {
        let path = workspace.join(&file.path);
        if let Some(dir) = path.parent() {
            disk.create_dir_all(dir)?;
        }
        disk.create_new(&path, &file.bytes())?;
        disk.sync_file(&path)?;
        // Every directory it made, so that a power cut keeps the file's name.
        for dir in path.ancestors().skip(1) {
            if dir == workspace {
                break;
            }
            disk.sync_file(dir)?;
        }
    }
    disk.sync_file(workspace)
}

/// What the schedule's planted symlinks point at outside the session, as an
/// attacker's would: the existing file a `symlink-at-output` link names, and the
/// directory a `symlinked-worktree-dir` link pointing outside names. A write that
/// follows a link lands in them.
fn set_up_symlink_victims(disk: &dyn Disk, schedule: &[Fault]) -> std::io::Result<()> {
    let file = schedule
        .iter()
        .any(|f| matches!(f, Fault::SymlinkAtOutput { .. }));
    let dir = schedule.iter().any(|f| {
        matches!(
            f,
            Fault::SymlinkedWorktreeDir {
                target: LinkTarget::Outside,
                ..
            }
        )
    });
    if file {
        let victim = Path::new(SYMLINK_TARGET);
        if let Some(dir) = victim.parent() {
            disk.create_dir_all(dir)?;
        }
        disk.create_new(victim, b"")?;
        disk.sync_file(victim)?;
    }
    if dir {
        // Durable at once: creating a directory syncs its parent.
        disk.create_dir_all(Path::new(SYMLINK_DIR_TARGET))?;
    }
    Ok(())
}
