//! Scenario names: unique within a folder, as `docs/scenario-format.md` requires.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{LoadedScenario, ScenarioError};

/// Checks that no two of `scenarios` in the same folder share a `name`. The same
/// file given twice (under two spellings of its path) is not a clash: it is one
/// scenario, and dropping the copy is the caller's business.
pub fn check_unique_names(scenarios: &[LoadedScenario]) -> Result<(), ScenarioError> {
    // (folder, name) → the first file seen with that name there.
    let mut seen: BTreeMap<(PathBuf, &str), PathBuf> = BTreeMap::new();
    for loaded in scenarios {
        let file = canonical(&loaded.path);
        let folder = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let key = (folder, loaded.scenario.name.as_str());
        match seen.get(&key) {
            Some(first) if *first != file => {
                return Err(ScenarioError::DuplicateName {
                    name: loaded.scenario.name.clone(),
                    first: first.clone(),
                    second: loaded.path.clone(),
                });
            }
            Some(_) => {}
            None => {
                seen.insert(key, file);
            }
        }
    }
    Ok(())
}

/// The file's canonical path, or the path as given when it cannot be resolved (a
/// scenario parsed from text that names no file on disk).
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
