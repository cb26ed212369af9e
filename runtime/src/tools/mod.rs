//! The tools layer: tool names and surfaces, the standard tools, and the gate every
//! call passes.
//!
//! - [`ToolName`], [`Role`], [`ToolSurface`]: which tools exist and who may call them.
//! - [`ToolInput`]: the typed inputs of the standard tools, parsed strictly.
//! - [`StandardTools`]: the production Read/Write/Edit/Bash/Glob/Grep/scratchpad tools
//!   over the World's disk and shell.
//! - [`ToolGate`]: surface, confinement and lost-update checks in front of any
//!   [`Tools`](crate::world::Tools), real or scripted.

mod gate;
mod glob;
mod input;
mod standard;
mod surface;

pub use gate::{ToolCallContext, ToolGate};
pub use glob::{GlobError, GlobPattern};
pub use input::{
    resolve_path, BashInput, EditInput, GlobInput, GrepInput, InputError, ReadInput,
    ScratchpadReadInput, ScratchpadWriteInput, ToolInput, WriteInput,
};
pub use standard::{
    apply_edit, EditError, StandardTools, BASH_TIMEOUT_MS_DEFAULT, BASH_TIMEOUT_MS_MAX,
    FILE_BYTES_MAX, SEARCH_RESULTS_MAX,
};
pub use surface::{Role, ToolName, ToolSurface};
