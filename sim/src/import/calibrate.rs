//! The bytes a token of a recorded session, as the cost meter should count them.
//!
//! The meter counts a request's tokens as its blocks' bytes (each block's JSON, as
//! the replay sends it) over a bytes-per-token ratio. The recording says how many
//! tokens each request had, but not how many any one block had: only
//! `input + cache_creation + cache_read` of the whole prompt. Between two
//! consecutive requests of one agent the prompt grows by exactly what was appended:
//! the assistant message of the first, as sent back, and the user message after it
//! (its tool results). When the replay bills that same content (the scripted turn
//! and the recorded results), its bytes are known, and so one pair gives one
//! measurement of bytes per token.
//!
//! A pair is measured only when the appended content is what the replay bills:
//!
//! - both requests recorded usage, and the prompt grew (a compaction shrinks it,
//!   and its summary is not what the replay bills);
//! - the first response had no thinking block: its text may be redacted or absent,
//!   and whether the API kept it in the next prompt depends on the model, so its
//!   tokens cannot be told apart;
//! - nothing arrived between the two but the results of the first response's calls,
//!   every one of them recorded: no `<task-notification>` (the replay's envelopes
//!   are the runtime's, not these), no user prompt (Claude Code adds command output
//!   and reminders the transcript marks as meta), no continuation the import added.
//!
//! The bytes are counted as the meter counts them (each block's JSON, with the
//! replay's tool-use ids), so the ratio also absorbs what the JSON and the API frame
//! differently: the tokens the API adds around each message and block, and the
//! recorded random tool-use ids, which tokenize far worse than prose. A short turn
//! is mostly framing, so pairs differ with their size: in the fixture sessions,
//! turns adding under 300 tokens measure about 2.3 bytes a token, turns adding over
//! 3,000 about 3.2. The ratio is therefore not a median of per-pair ratios, which
//! counts a 100-token turn as much as a 10,000-token one and lands low, but a ratio
//! of sums over the middle of the recorded tokens: the pairs are ordered by their
//! ratio, the pairs holding the lowest and the highest [`TRIM_PERCENT`] of the
//! tokens are cut off (a pair straddling a cut counts in proportion), and the rest's
//! bytes over its tokens is rounded to two decimals and clamped to
//! [`BytesPerToken::MIN`]`..=`[`BytesPerToken::MAX`]. A turn whose growth was mostly
//! something the transcript does not show (an image, a reminder) lands at the low
//! end and is cut off; the turns in the middle grow, in total, as recorded. It is
//! all integer arithmetic, so an import is deterministic.
//!
//! Fewer than [`MEASURED_TOKENS_MIN`] measured tokens leave the default four bytes
//! a token: a few short turns are mostly framing, and their ratio says more about
//! the API's per-block tokens than about the session's text.

use coord_runtime::world::{ContentBlock, Message, Role, Usage};

use super::extract::Thread;
use crate::cache::{BytesPerToken, Prompt};
use crate::model::{response_content, scripted_tool_use_id, AgentScript, ScriptedTurn};

/// The share of the measured tokens cut off at each end of the ordered pairs.
pub const TRIM_PERCENT: u64 = 10;
/// The least growth, in recorded tokens over every measured pair, a ratio is
/// calibrated on.
pub const MEASURED_TOKENS_MIN: u64 = 1_000;

/// What one measured pair of requests grew by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Growth {
    /// Bytes of the appended content, as the meter counts them.
    pub bytes: u64,
    /// Prompt tokens the recorded second request had beyond the first.
    pub tokens: u64,
}

/// The ratio an import writes to `[economics] bytes_per_token`, and what it was
/// measured on. The default is the default ratio, measured on nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calibration {
    /// The ratio: [`BytesPerToken::FOUR`] unless `calibrated`.
    pub bytes_per_token: BytesPerToken,
    /// Pairs of consecutive requests over every scripted agent.
    pub pairs: usize,
    /// Of those, the pairs measured.
    pub pairs_measured: usize,
    /// The recorded growth of the measured pairs, in tokens.
    pub tokens_measured: u64,
    /// Whether the ratio was measured: at least [`MEASURED_TOKENS_MIN`] tokens.
    pub calibrated: bool,
    /// Whether the measured ratio lay outside the accepted range and was clamped.
    pub clamped: bool,
}

impl Calibration {
    /// The calibration on `growths`, measured over `pairs` pairs of requests.
    pub fn of(pairs: usize, growths: &[Growth]) -> Calibration {
        let tokens_measured: u64 = growths.iter().map(|g| g.tokens).sum();
        let mut calibration = Calibration {
            bytes_per_token: BytesPerToken::FOUR,
            pairs,
            pairs_measured: growths.len(),
            tokens_measured,
            calibrated: false,
            clamped: false,
        };
        if tokens_measured < MEASURED_TOKENS_MIN {
            return calibration;
        }
        let Some(centi) = trimmed_centi_bytes_per_token(growths) else {
            return calibration;
        };
        let min = BytesPerToken::MIN.milli_bytes_per_token();
        let max = BytesPerToken::MAX.milli_bytes_per_token();
        let milli = u32::try_from(centi.saturating_mul(10)).unwrap_or(u32::MAX);
        let clamped_milli = milli.clamp(min, max);
        calibration.bytes_per_token = BytesPerToken::from_milli(clamped_milli)
            .expect("a ratio clamped to the accepted range is accepted");
        calibration.calibrated = true;
        calibration.clamped = clamped_milli != milli;
        calibration
    }

    /// One sentence for the import's header and summary.
    pub fn describe(&self) -> String {
        if self.pairs == 0 {
            return format!(
                "Tokens counted at the default {} bytes a token: no agent made two requests, \
                 so no growth to calibrate on.",
                self.bytes_per_token
            );
        }
        if !self.calibrated {
            return format!(
                "Tokens counted at the default {} bytes a token: the {} of {} request pairs \
                 measurable grew by {} tokens, under the {} a ratio is calibrated on.",
                self.bytes_per_token,
                self.pairs_measured,
                self.pairs,
                self.tokens_measured,
                MEASURED_TOKENS_MIN
            );
        }
        format!(
            "Tokens counted at {} bytes a token{}, calibrated on the growth of {} of {} \
             request pairs ({} tokens).",
            self.bytes_per_token,
            if self.clamped {
                " (clamped to the accepted range)"
            } else {
                ""
            },
            self.pairs_measured,
            self.pairs,
            self.tokens_measured
        )
    }
}

/// Calibrates on every `(thread, script)` pair: each agent's recording and the
/// script that plays it (see the module documentation).
pub fn calibrate<'a>(
    agents: impl IntoIterator<Item = (&'a Thread, &'a AgentScript)>,
) -> Calibration {
    let mut pairs = 0;
    let mut growths = Vec::new();
    for (thread, script) in agents {
        pairs += thread.responses.len().saturating_sub(1);
        growths.extend(measured_growths(thread, script));
    }
    Calibration::of(pairs, &growths)
}

/// The growth of each measurable pair of `thread`'s requests, `script` being the
/// script that plays it (one turn per recorded response).
pub fn measured_growths(thread: &Thread, script: &AgentScript) -> Vec<Growth> {
    let mut growths = Vec::new();
    for (step, pair) in thread.responses.windows(2).enumerate() {
        let (first, second) = (&pair[0], &pair[1]);
        let (Some(before), Some(after), Some(turn)) =
            (first.usage, second.usage, script.turns.get(step))
        else {
            continue;
        };
        let (before, after) = (prompt_tokens(&before), prompt_tokens(&after));
        let arrived = &second.before;
        let calls = first.tool_calls.len();
        let only_results = arrived.notifications.is_empty()
            && arrived.user_prompts == 0
            && arrived.tool_results == calls;
        let replayed_as_recorded =
            turn.tool_calls.len() == calls && turn.tool_calls.iter().all(|c| c.result.is_some());
        if after <= before || first.thinking_blocks > 0 || !only_results || !replayed_as_recorded {
            continue;
        }
        growths.push(Growth {
            bytes: appended_bytes(turn, step),
            tokens: after - before,
        });
    }
    growths
}

/// Prompt tokens of a request: uncached input, cache writes and cache reads.
fn prompt_tokens(usage: &Usage) -> u64 {
    usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
}

/// The bytes the meter bills for what the replay appends after `turn`, played as
/// step `step`: its assistant message, then its calls' recorded results.
fn appended_bytes(turn: &ScriptedTurn, step: usize) -> u64 {
    let mut prompt = Prompt::new();
    prompt.push_message(&Message {
        role: Role::Assistant,
        content: response_content(turn, step),
    });
    let results: Vec<ContentBlock> = turn
        .tool_calls
        .iter()
        .enumerate()
        .map(|(index, call)| ContentBlock::ToolResult {
            tool_use_id: scripted_tool_use_id(step, index),
            content: call.result.clone().unwrap_or_default(),
            is_error: false,
            cache_control: None,
        })
        .collect();
    if !results.is_empty() {
        prompt.push_message(&Message {
            role: Role::User,
            content: results,
        });
    }
    prompt.blocks().iter().map(|b| b.bytes().len() as u64).sum()
}

/// Bytes per token in hundredths over the middle of the growths' tokens (the
/// module documentation), rounded to the nearest; `None` without any token.
pub fn trimmed_centi_bytes_per_token(growths: &[Growth]) -> Option<u64> {
    let mut sorted: Vec<Growth> = growths.iter().copied().filter(|g| g.tokens > 0).collect();
    // By ratio, compared exactly: a/b < c/d ⇔ a·d < c·b. Ties keep the larger
    // growth first, so the order does not depend on the input's.
    sorted.sort_by(|a, b| {
        let (left, right) = (
            u128::from(a.bytes) * u128::from(b.tokens),
            u128::from(b.bytes) * u128::from(a.tokens),
        );
        left.cmp(&right)
            .then(b.tokens.cmp(&a.tokens))
            .then(b.bytes.cmp(&a.bytes))
    });
    let total: u64 = sorted.iter().map(|g| g.tokens).sum();
    if total == 0 {
        return None;
    }
    let low = total * TRIM_PERCENT / 100;
    let high = total - low;
    // Kept bytes in thousandths, so a pair counted in part loses at most a
    // thousandth of a byte to the division.
    let (mut kept_milli_bytes, mut kept_tokens) = (0u128, 0u128);
    let mut start = 0u64;
    for growth in sorted {
        let end = start + growth.tokens;
        let kept = end.min(high).saturating_sub(start.max(low));
        start = end;
        if kept == 0 {
            continue;
        }
        kept_milli_bytes +=
            u128::from(growth.bytes) * u128::from(kept) * 1_000 / u128::from(growth.tokens);
        kept_tokens += u128::from(kept);
    }
    // high − low ≥ 1 whenever total ≥ 1, so some token is always kept.
    let scale = kept_tokens * 10;
    let centi = (kept_milli_bytes + scale / 2) / scale;
    Some(u64::try_from(centi).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn growth(bytes: u64, tokens: u64) -> Growth {
        Growth { bytes, tokens }
    }

    #[test]
    fn one_pair_is_its_own_ratio_to_two_decimals() {
        // Goal: without anything to trim, the ratio is bytes over tokens, rounded.
        assert_eq!(
            trimmed_centi_bytes_per_token(&[growth(2_950, 1_000)]),
            Some(295)
        );
        assert_eq!(
            trimmed_centi_bytes_per_token(&[growth(1_000, 300)]),
            Some(333)
        );
        assert_eq!(
            trimmed_centi_bytes_per_token(&[growth(2_000, 300)]),
            Some(667)
        );
        assert_eq!(trimmed_centi_bytes_per_token(&[]), None);
        assert_eq!(trimmed_centi_bytes_per_token(&[growth(5, 0)]), None);
    }

    #[test]
    fn the_ends_of_the_tokens_are_cut_off_not_the_ends_of_the_pairs() {
        // Goal: an outlier holding under a tenth of the tokens moves nothing, and
        // small pairs weigh by their tokens. Method: 8,000 tokens at exactly 3 bytes,
        // flanked by 1,000 tokens at 1 byte (a reminder the transcript lacks) and
        // 1,000 at 8 bytes: both ends are cut off whole.
        let growths = [
            growth(12_000, 4_000),
            growth(1_000, 1_000),
            growth(12_000, 4_000),
            growth(8_000, 1_000),
        ];
        assert_eq!(trimmed_centi_bytes_per_token(&growths), Some(300));
        // The same with the pairs in another order.
        let mut reversed = growths;
        reversed.reverse();
        assert_eq!(trimmed_centi_bytes_per_token(&reversed), Some(300));
    }

    #[test]
    fn too_little_growth_keeps_the_default_and_a_wild_ratio_is_clamped() {
        // Goal: under the minimum of measured tokens the default stays, and a ratio
        // outside 1..=8 bytes is clamped and flagged, never written as measured.
        let few = Calibration::of(3, &[growth(900, 300), growth(1_000, 400)]);
        assert_eq!(few.tokens_measured, 700);
        assert!(!few.calibrated);
        assert_eq!(few.bytes_per_token, BytesPerToken::FOUR);
        let dense = Calibration::of(1, &[growth(1_000, 2_000)]);
        assert!(dense.calibrated && dense.clamped);
        assert_eq!(dense.bytes_per_token, BytesPerToken::MIN);
        let sparse = Calibration::of(1, &[growth(90_000, 10_000)]);
        assert!(sparse.clamped);
        assert_eq!(sparse.bytes_per_token, BytesPerToken::MAX);
        let fair = Calibration::of(1, &[growth(3_070, 1_000)]);
        assert!(fair.calibrated && !fair.clamped);
        assert_eq!(fair.bytes_per_token.milli_bytes_per_token(), 3_070);
    }

    #[test]
    fn a_pair_straddling_a_cut_counts_in_proportion() {
        // Goal: the cut falls inside a pair. Method: 10,000 tokens, so 1,000 are cut
        // at each end: 1,000 of the low pair's 1,500 tokens at 2 bytes, and the 500
        // at 4 bytes with the top 500 of the 8,000 at 3 bytes:
        // (500·2 + 7,500·3) / 8,000 = 2.9375 → 2.94.
        let growths = [
            growth(3_000, 1_500),
            growth(24_000, 8_000),
            growth(2_000, 500),
        ];
        assert_eq!(trimmed_centi_bytes_per_token(&growths), Some(294));
    }
}
