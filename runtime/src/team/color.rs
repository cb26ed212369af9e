//! Member colours: fixed palette, assigned in join order.
//!
//! A member's colour tags its messages in the UI. It is a pure function of how many
//! members joined before it, never of a random draw or of who is still in the team,
//! so the same sequence of joins gives the same colours in every run, and a member
//! who leaves does not make a later one inherit a colour mid-conversation.

/// The palette, in assignment order. After the last colour it starts again.
pub const PALETTE: [&str; 8] = [
    "red", "blue", "green", "yellow", "purple", "orange", "pink", "cyan",
];

/// The colour of the member who joined `join_index`-th (0-based, the lead is 0).
pub fn color_for_join(join_index: u64) -> &'static str {
    let palette_len = PALETTE.len() as u64;
    let slot = usize::try_from(join_index % palette_len).expect("a palette index fits usize");
    PALETTE[slot]
}
