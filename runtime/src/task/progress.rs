//! Progress of a running task, as the coordinator's UI and envelopes report it.

use serde::Serialize;
use std::collections::VecDeque;

/// How many recent activities a task keeps.
pub const ACTIVITIES_RECENT_MAX: usize = 5;

/// Counters for one task.
///
/// Input tokens keep the *latest* reported value, because every request re-sends the
/// whole conversation: summing them would count the prefix once per turn. Output
/// tokens are new on every turn, so they are summed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// Tool calls made so far.
    pub tool_uses: u64,
    /// Input tokens of the latest request (uncached + cache write + cache read).
    pub input_tokens_latest: u64,
    /// Output tokens over all turns.
    pub output_tokens_total: u64,
    /// The last few activities, oldest first.
    recent_activities: VecDeque<String>,
}

impl Progress {
    /// Records a model turn's usage.
    pub fn record_turn(&mut self, input_tokens: u64, output_tokens: u64) {
        self.input_tokens_latest = input_tokens;
        self.output_tokens_total = self.output_tokens_total.saturating_add(output_tokens);
    }

    /// Records one tool call and its one-line description.
    pub fn record_tool_use(&mut self, activity: impl Into<String>) {
        self.tool_uses = self.tool_uses.saturating_add(1);
        self.record_activity(activity);
    }

    /// Records an activity, dropping the oldest past [`ACTIVITIES_RECENT_MAX`].
    pub fn record_activity(&mut self, activity: impl Into<String>) {
        if self.recent_activities.len() == ACTIVITIES_RECENT_MAX {
            self.recent_activities.pop_front();
        }
        self.recent_activities.push_back(activity.into());
        assert!(self.recent_activities.len() <= ACTIVITIES_RECENT_MAX);
    }

    /// The recent activities, oldest first.
    pub fn recent_activities(&self) -> impl Iterator<Item = &str> {
        self.recent_activities.iter().map(String::as_str)
    }

    /// Total tokens as an envelope's `<usage>` reports them.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens_latest
            .saturating_add(self.output_tokens_total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_activities_are_kept_oldest_first() {
        // Goal: PROTOCOL.md §1 keeps the last five activities. Method: seven tool
        // uses; the first two fall out, the count keeps all seven.
        let mut progress = Progress::default();
        for name in ["Glob", "Read", "Grep", "Read", "Glob", "Grep", "Bash"] {
            progress.record_tool_use(name);
        }
        assert_eq!(progress.tool_uses, 7);
        let recent: Vec<&str> = progress.recent_activities().collect();
        assert_eq!(recent, ["Grep", "Read", "Glob", "Grep", "Bash"]);
    }
}
