//! Token counts of one API response, or a sum of them.

use serde::Serialize;

/// Token counts as the Messages API reports them in `usage`, with the cache-write split.
///
/// `cache_creation_5m_input_tokens + cache_creation_1h_input_tokens` always equals
/// `cache_creation_input_tokens`: writes the response does not attribute to the 1-hour TTL
/// are 5-minute writes, the API's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Tokens written to the prompt cache, both TTLs.
    pub cache_creation_input_tokens: u64,
    /// Tokens written to the prompt cache with the 5-minute TTL.
    pub cache_creation_5m_input_tokens: u64,
    /// Tokens written to the prompt cache with the 1-hour TTL.
    pub cache_creation_1h_input_tokens: u64,
    /// Tokens read from the prompt cache.
    pub cache_read_input_tokens: u64,
}

impl Usage {
    /// A response's usage from the counts it reports; `cache_creation_1h_input_tokens` is
    /// capped at the total so the split never changes it.
    pub fn from_response(
        input_tokens: u64,
        output_tokens: u64,
        cache_creation_input_tokens: u64,
        cache_creation_1h_input_tokens: u64,
        cache_read_input_tokens: u64,
    ) -> Usage {
        let one_hour = cache_creation_1h_input_tokens.min(cache_creation_input_tokens);
        Usage {
            input_tokens,
            output_tokens,
            cache_creation_input_tokens,
            cache_creation_5m_input_tokens: cache_creation_input_tokens - one_hour,
            cache_creation_1h_input_tokens: one_hour,
            cache_read_input_tokens,
        }
    }

    /// The whole prompt: uncached input, cache writes and cache reads.
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_creation_input_tokens)
            .saturating_add(self.cache_read_input_tokens)
    }

    /// Prompt and output together; the size used to pick the largest of duplicate lines.
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens().saturating_add(self.output_tokens)
    }

    /// Adds `other` to these counts, saturating so that hostile input cannot overflow
    /// them. Returns false if any sum was clamped at `u64::MAX`, so that the caller
    /// can say so: a clamped total is not the true one.
    pub fn add(&mut self, other: &Usage) -> bool {
        let mut exact = true;
        let mut add = |sum: &mut u64, more: u64| {
            *sum = sum.checked_add(more).unwrap_or_else(|| {
                exact = false;
                u64::MAX
            });
        };
        add(&mut self.input_tokens, other.input_tokens);
        add(&mut self.output_tokens, other.output_tokens);
        add(
            &mut self.cache_creation_input_tokens,
            other.cache_creation_input_tokens,
        );
        add(
            &mut self.cache_creation_5m_input_tokens,
            other.cache_creation_5m_input_tokens,
        );
        add(
            &mut self.cache_creation_1h_input_tokens,
            other.cache_creation_1h_input_tokens,
        );
        add(
            &mut self.cache_read_input_tokens,
            other.cache_read_input_tokens,
        );
        exact
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_always_sums_to_the_total() {
        // Goal: the 5m/1h split is derived from the total, so it can never disagree with it.
        let usage = Usage::from_response(1, 2, 100, 30, 4);
        assert_eq!(usage.cache_creation_5m_input_tokens, 70);
        assert_eq!(usage.cache_creation_1h_input_tokens, 30);
        let capped = Usage::from_response(1, 2, 100, 500, 4);
        assert_eq!(capped.cache_creation_1h_input_tokens, 100);
        assert_eq!(capped.cache_creation_5m_input_tokens, 0);
        assert_eq!(capped.prompt_tokens(), 105);
        assert_eq!(capped.total_tokens(), 107);
    }

    #[test]
    fn add_saturates_instead_of_overflowing() {
        // Goal: absurd counts in a transcript cannot panic the accounting.
        let mut usage = Usage::from_response(u64::MAX, 0, 0, 0, 0);
        assert!(
            !usage.add(&Usage::from_response(5, 1, 0, 0, 0)),
            "the clamp is reported"
        );
        assert_eq!(usage.input_tokens, u64::MAX);
        assert_eq!(usage.output_tokens, 1);
        assert!(
            usage.add(&Usage::from_response(0, 1, 0, 0, 0)),
            "an exact sum is exact"
        );
    }
}
