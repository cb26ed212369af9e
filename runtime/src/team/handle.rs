//! [`Team`]: one process's handle on a team file.
//!
//! Several agents (each in its own process, each with its own `Team`) change one team
//! file: the lead adds and removes members, members set their own flags. Every change
//! is therefore a read-modify-write under the file's lock (`team.json.lock`, the same
//! lock files as mailboxes): reload from disk, check, apply, replace atomically. The
//! in-memory copy is only a cache of the last file seen; it is never written back
//! without re-reading, so no one's change is lost to a stale copy.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use super::color::color_for_join;
use super::file::{Member, TeamError, TeamFile};
use crate::ipc::lock_path_for;
use crate::ipc::{validate_segment, LockGuard, Mailbox, MailboxConfig, SessionLayout};
use crate::profile::Profile;
use crate::route::TeamRoster;
use crate::task::TaskId;
use crate::world::World;

/// A callback run when a member goes idle, with the member's name.
pub type IdleCallback = Box<dyn Fn(&str) + Send + Sync>;

/// The lock owner written into the team file's lock.
const LOCK_OWNER: &str = "team-file";

/// A handle on `<root>/teams/<team>/team.json`.
pub struct Team {
    pub(super) world: World,
    pub(super) layout: SessionLayout,
    pub(super) profile: Profile,
    pub(super) path: PathBuf,
    pub(super) file: TeamFile,
    pub(super) idle_callbacks: Vec<IdleCallback>,
}

impl fmt::Debug for Team {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Team")
            .field("path", &self.path)
            .field("profile", &self.profile)
            .field("file", &self.file)
            .field("idle_callbacks", &self.idle_callbacks.len())
            .finish_non_exhaustive()
    }
}

/// The team file of `team` under `layout`.
pub fn team_file_path(layout: &SessionLayout, team: &str) -> Result<PathBuf, TeamError> {
    validate_segment("team name", team)?;
    Ok(layout.root().join("teams").join(team).join("team.json"))
}

impl Team {
    /// Creates team `name` led by `lead` (agent `lead_agent_id`), who joins first.
    /// Fails with [`TeamError::AlreadyExists`] if the team file exists.
    pub async fn create(
        world: &World,
        layout: &SessionLayout,
        profile: Profile,
        name: &str,
        lead: &str,
        lead_agent_id: TaskId,
    ) -> Result<Team, TeamError> {
        let path = team_file_path(layout, name)?;
        validate_segment("member name", lead)?;
        let now_unix_ms = world.clock.unix_ms();
        let file = TeamFile {
            name: name.to_owned(),
            lead: lead.to_owned(),
            created_at_unix_ms: now_unix_ms,
            joins_total: 1,
            members: vec![Member {
                name: lead.to_owned(),
                agent_id: lead_agent_id,
                color: color_for_join(0).to_owned(),
                joined_at_unix_ms: now_unix_ms,
                is_idle: false,
                shutdown_requested: false,
            }],
        };
        let mut team = Team {
            world: world.clone(),
            layout: layout.clone(),
            profile,
            path,
            file: file.clone(),
            idle_callbacks: Vec::new(),
        };
        let dir = team.path.parent().expect("a team file has a directory");
        world
            .disk
            .create_dir_all(dir)
            .map_err(|source| team.io_error(source))?;
        let guard = team.lock().await?;
        match world.disk.metadata(&team.path) {
            Ok(_) => return Err(TeamError::AlreadyExists { path: team.path }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(team.io_error(error)),
        }
        team.write(&file)?;
        guard.release()?;
        team.file = file;
        Ok(team)
    }

    /// Loads team `name` from its file, or, when it has none yet, creates it with
    /// `lead` (agent `lead_agent_id`) as its lead: how a session's first teammate
    /// brings its team into being.
    pub async fn load_or_create(
        world: &World,
        layout: &SessionLayout,
        profile: Profile,
        name: &str,
        lead: &str,
        lead_agent_id: TaskId,
    ) -> Result<Team, TeamError> {
        match Team::load(world, layout, profile, name).await {
            Err(TeamError::NotFound { .. }) => {
                Team::create(world, layout, profile, name, lead, lead_agent_id).await
            }
            loaded => loaded,
        }
    }

    /// Loads team `name` from its file.
    pub async fn load(
        world: &World,
        layout: &SessionLayout,
        profile: Profile,
        name: &str,
    ) -> Result<Team, TeamError> {
        let path = team_file_path(layout, name)?;
        let mut team = Team {
            world: world.clone(),
            layout: layout.clone(),
            profile,
            path,
            file: TeamFile {
                name: name.to_owned(),
                lead: String::new(),
                created_at_unix_ms: 0,
                joins_total: 0,
                members: Vec::new(),
            },
            idle_callbacks: Vec::new(),
        };
        team.reload().await?;
        Ok(team)
    }

    /// Re-reads the file, under its lock so that a half-applied change is never seen.
    pub async fn reload(&mut self) -> Result<&TeamFile, TeamError> {
        let guard = self.lock().await?;
        let file = self.read()?;
        guard.release()?;
        self.file = file;
        Ok(&self.file)
    }

    /// The file as last read or written by this handle.
    pub fn file(&self) -> &TeamFile {
        &self.file
    }

    /// The team's name.
    pub fn name(&self) -> &str {
        &self.file.name
    }

    /// The team file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The profile this handle follows (it sets the mailbox write mode).
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// The member called `name` (ignoring ASCII case), as last seen.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.file.member(name)
    }

    /// Who is in the team, as routing needs it.
    pub fn roster(&self) -> TeamRoster {
        TeamRoster {
            team: self.file.name.clone(),
            lead: self.file.lead.clone(),
            lead_agent_id: self.file.lead_member().agent_id.clone(),
            members: self.file.member_names(),
        }
    }

    /// Adds member `name` (agent `agent_id`), coloured by join order. Returns its entry.
    pub async fn add_member(&mut self, name: &str, agent_id: TaskId) -> Result<Member, TeamError> {
        validate_segment("member name", name)?;
        let now_unix_ms = self.world.clock.unix_ms();
        self.update(|file| {
            if file.member(name).is_some() {
                return Err(TeamError::DuplicateMember {
                    team: file.name.clone(),
                    name: name.to_owned(),
                });
            }
            if file
                .members
                .iter()
                .any(|member| member.agent_id == agent_id)
            {
                return Err(TeamError::DuplicateAgent {
                    team: file.name.clone(),
                    agent_id: agent_id.clone(),
                });
            }
            let member = Member {
                name: name.to_owned(),
                agent_id: agent_id.clone(),
                color: color_for_join(file.joins_total).to_owned(),
                joined_at_unix_ms: now_unix_ms,
                is_idle: false,
                shutdown_requested: false,
            };
            file.joins_total += 1;
            file.members.push(member.clone());
            Ok(member)
        })
        .await
    }

    /// Removes member `name` (ignoring case). The lead cannot be removed. Returns the
    /// removed entry.
    pub async fn remove_member(&mut self, name: &str) -> Result<Member, TeamError> {
        self.update(|file| {
            if file.is_lead(name) {
                return Err(TeamError::RemoveLead {
                    team: file.name.clone(),
                    name: file.lead.clone(),
                });
            }
            let index = file
                .members
                .iter()
                .position(|member| member.name.eq_ignore_ascii_case(name))
                .ok_or_else(|| TeamError::UnknownMember {
                    team: file.name.clone(),
                    name: name.to_owned(),
                })?;
            // `remove`, not `swap_remove`: join order is the file's order.
            Ok(file.members.remove(index))
        })
        .await
    }

    /// The mailbox of `name`, with the profile's write mode. A member's name is
    /// spelt as the team file lists it, so `BOB` and `bob` share one inbox file even
    /// on a case-sensitive filesystem.
    pub fn mailbox(&self, name: &str) -> Result<Mailbox, TeamError> {
        let name = self
            .file
            .member(name)
            .map_or(name, |member| member.name.as_str());
        let path = self.layout.inbox(&self.file.name, name)?;
        let config = MailboxConfig::with_write_mode(self.profile.mailbox_write_mode());
        Ok(Mailbox::new(&self.world, path, config))
    }

    /// Writes `text` from `from` to the mailbox of each of `recipients`, in order,
    /// with [`ipc::broadcast`](crate::ipc::broadcast): it skips the sender and stops
    /// at the first failed write, naming who already has the message. Every name is
    /// checked before anything is written.
    pub async fn broadcast(
        &self,
        from: &str,
        text: &str,
        recipients: &[String],
    ) -> Result<Vec<String>, TeamError> {
        let inboxes = recipients
            .iter()
            .map(|name| Ok((name.as_str(), self.mailbox(name)?)))
            .collect::<Result<std::collections::HashMap<_, _>, TeamError>>()?;
        let inbox_of = |name: &str| inboxes[name].clone();
        Ok(crate::ipc::broadcast(&self.world, from, text, recipients, inbox_of).await?)
    }

    /// The canonical (as listed) name of member `name`, or [`TeamError::UnknownMember`].
    pub(super) fn member_name(&self, name: &str) -> Result<String, TeamError> {
        self.file
            .member(name)
            .map(|member| member.name.clone())
            .ok_or_else(|| self.unknown_member(name))
    }

    pub(super) fn unknown_member(&self, name: &str) -> TeamError {
        TeamError::UnknownMember {
            team: self.file.name.clone(),
            name: name.to_owned(),
        }
    }

    /// Read-modify-write of the file under its lock. `change` sees the file as it is on
    /// disk now; if it fails, nothing is written. The cache is refreshed either way.
    pub(super) async fn update<T>(
        &mut self,
        change: impl FnOnce(&mut TeamFile) -> Result<T, TeamError>,
    ) -> Result<T, TeamError> {
        let guard = self.lock().await?;
        let mut file = self.read()?;
        self.file = file.clone();
        let outcome = change(&mut file)?;
        file.check().map_err(|reason| TeamError::Inconsistent {
            path: self.path.clone(),
            reason,
        })?;
        self.write(&file)?;
        guard.release()?;
        self.file = file;
        Ok(outcome)
    }

    async fn lock(&self) -> Result<LockGuard, TeamError> {
        // The lock file lives beside the team file: without the team's directory there
        // is no team (only `create` makes the directory).
        let dir = self.path.parent().expect("a team file has a directory");
        match self.world.disk.metadata(dir) {
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(TeamError::NotFound {
                    path: self.path.clone(),
                })
            }
            Err(error) => return Err(self.io_error(error)),
        }
        let lock_path = lock_path_for(&self.path);
        let policy = MailboxConfig::default().lock;
        Ok(LockGuard::acquire(&self.world, &lock_path, LOCK_OWNER, &policy).await?)
    }

    fn read(&self) -> Result<TeamFile, TeamError> {
        let bytes = match self.world.disk.read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(TeamError::NotFound {
                    path: self.path.clone(),
                })
            }
            Err(error) => return Err(self.io_error(error)),
        };
        let file: TeamFile =
            serde_json::from_slice(&bytes).map_err(|error| TeamError::Corrupt {
                path: self.path.clone(),
                line: error.line(),
                // serde_json reports column 0 for an error before the line's first
                // character; the field is 1-based.
                column: error.column().max(1),
                detail: error.to_string(),
            })?;
        file.check().map_err(|reason| TeamError::Inconsistent {
            path: self.path.clone(),
            reason,
        })?;
        Ok(file)
    }

    fn write(&self, file: &TeamFile) -> Result<(), TeamError> {
        let mut bytes = serde_json::to_vec_pretty(file).expect("a team file serializes");
        bytes.push(b'\n');
        self.world
            .disk
            .replace_atomic(&self.path, &bytes)
            .map_err(|source| self.io_error(source))
    }

    fn io_error(&self, source: io::Error) -> TeamError {
        TeamError::Io {
            path: self.path.clone(),
            source,
        }
    }
}
