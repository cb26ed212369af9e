//! Whether a spawn runs in the background.

/// Everything the async decision depends on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AsyncInputs {
    /// The call asked for `run_in_background`.
    pub run_in_background: bool,
    /// The agent definition always runs in the background.
    pub definition_background: bool,
    /// The session is in coordinator mode.
    pub coordinator_mode: bool,
    /// The fork experiment is on.
    pub fork_experiment: bool,
    /// Assistant mode is on.
    pub assistant_mode: bool,
    /// Proactive mode is on.
    pub proactive_mode: bool,
    /// Background tasks are disabled: the override that forces sync.
    pub background_tasks_disabled: bool,
}

/// A spawn is async if any of the six conditions holds, unless background tasks are
/// disabled. A session refuses coordinator mode with background tasks disabled (see
/// `SessionConfig`), so in coordinator mode every spawn is async.
pub fn is_async(inputs: AsyncInputs) -> bool {
    let wants_async = inputs.run_in_background
        || inputs.definition_background
        || inputs.coordinator_mode
        || inputs.fork_experiment
        || inputs.assistant_mode
        || inputs.proactive_mode;
    wants_async && !inputs.background_tasks_disabled
}
