//! Token counts for blocks, from a pluggable estimator.

use std::borrow::Cow;
use std::fmt::{self, Debug};

/// Counts the tokens of one block's bytes.
///
/// The cache works on bytes; tokens only enter through the minimum cacheable length
/// and the `usage` numbers. A recorded transcript can pin a block's count with
/// [`Block::with_tokens`](super::Block::with_tokens), which bypasses the estimator.
pub trait TokenEstimator: Debug + Send + Sync {
    /// The number of tokens `bytes` would tokenize to.
    fn estimate_tokens(&self, bytes: &[u8]) -> u64;
}

/// One token per a fixed number of bytes, rounded up per block: the estimator every
/// run uses, at [`BytesPerToken::FOUR`] unless the scenario's `[economics]
/// bytes_per_token` sets another ratio.
///
/// The ratio is held in thousandths of a byte, so every count is integer arithmetic
/// and a run's usage never depends on floating-point rounding.
///
/// Known error at four bytes a token: Claude's tokenizer averages roughly 3.5 to 4
/// bytes per token on English prose, so this is usually within about 15% there; it
/// undercounts code, JSON and other punctuation-dense text (often 2.5 to 3 bytes per
/// token) by up to about 35%, and CJK text (about one token per 3-byte character) by
/// about 25%. It also ignores the few tokens of framing the API adds around each
/// message and tool, so short blocks are undercounted most. `coordsim import`
/// calibrates the ratio to each recorded session; use recorded counts where exact
/// usage matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BytesPerToken {
    milli_bytes_per_token: u32,
}

/// A bytes-per-token ratio outside [`BytesPerToken::MIN`]`..=`[`BytesPerToken::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error(
    "bytes_per_token must be a number from {min} to {max} (bytes of text per token), not {value}",
    min = BytesPerToken::MIN,
    max = BytesPerToken::MAX
)]
pub struct BytesPerTokenError {
    /// The ratio refused.
    pub value: f64,
}

impl BytesPerToken {
    /// Four bytes a token: the default.
    pub const FOUR: BytesPerToken = BytesPerToken {
        milli_bytes_per_token: 4_000,
    };
    /// The smallest ratio accepted: one byte a token (no tokenizer does better on
    /// text a conversation carries; below it a setting is a mistake, not a ratio).
    pub const MIN: BytesPerToken = BytesPerToken {
        milli_bytes_per_token: 1_000,
    };
    /// The largest ratio accepted: eight bytes a token, twice what English prose
    /// averages.
    pub const MAX: BytesPerToken = BytesPerToken {
        milli_bytes_per_token: 8_000,
    };

    /// The ratio of `milli_bytes_per_token` thousandths of a byte per token, or an
    /// error outside [`MIN`](Self::MIN)`..=`[`MAX`](Self::MAX).
    pub fn from_milli(milli_bytes_per_token: u32) -> Result<Self, BytesPerTokenError> {
        let ratio = BytesPerToken {
            milli_bytes_per_token,
        };
        if (Self::MIN..=Self::MAX).contains(&ratio) {
            Ok(ratio)
        } else {
            Err(BytesPerTokenError {
                value: f64::from(milli_bytes_per_token) / 1_000.0,
            })
        }
    }

    /// The ratio `bytes_per_token`, rounded to the nearest thousandth of a byte, or
    /// an error when it is not a number in [`MIN`](Self::MIN)`..=`[`MAX`](Self::MAX).
    pub fn from_bytes_per_token(bytes_per_token: f64) -> Result<Self, BytesPerTokenError> {
        let refused = BytesPerTokenError {
            value: bytes_per_token,
        };
        let range = Self::MIN.bytes_per_token()..=Self::MAX.bytes_per_token();
        // NaN fails the range check too, so the cast below only sees 1000..=8000.
        if !range.contains(&bytes_per_token) {
            return Err(refused);
        }
        Self::from_milli((bytes_per_token * 1_000.0).round() as u32).map_err(|_| refused)
    }

    /// Thousandths of a byte per token.
    pub fn milli_bytes_per_token(self) -> u32 {
        self.milli_bytes_per_token
    }

    /// Bytes per token, as scenario files write it.
    pub fn bytes_per_token(self) -> f64 {
        f64::from(self.milli_bytes_per_token) / 1_000.0
    }
}

impl Default for BytesPerToken {
    fn default() -> Self {
        Self::FOUR
    }
}

impl fmt::Display for BytesPerToken {
    /// Bytes per token with as many decimals as it has (`4`, `2.95`, `3.125`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.milli_bytes_per_token / 1_000;
        let fraction = self.milli_bytes_per_token % 1_000;
        if fraction == 0 {
            return write!(f, "{whole}.0");
        }
        let digits = format!("{fraction:03}");
        write!(f, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

impl TokenEstimator for BytesPerToken {
    fn estimate_tokens(&self, bytes: &[u8]) -> u64 {
        // tokens = ceil(bytes / (milli / 1000)) = ceil(bytes * 1000 / milli), in u128
        // so that no block length can overflow the product.
        let scaled = bytes.len() as u128 * 1_000;
        let tokens = scaled.div_ceil(u128::from(self.milli_bytes_per_token));
        u64::try_from(tokens).unwrap_or(u64::MAX)
    }
}

impl TryFrom<f64> for BytesPerToken {
    type Error = BytesPerTokenError;

    fn try_from(bytes_per_token: f64) -> Result<Self, Self::Error> {
        Self::from_bytes_per_token(bytes_per_token)
    }
}

impl From<BytesPerToken> for f64 {
    fn from(ratio: BytesPerToken) -> f64 {
        ratio.bytes_per_token()
    }
}

impl serde::Serialize for BytesPerToken {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.bytes_per_token())
    }
}

impl<'de> serde::Deserialize<'de> for BytesPerToken {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // f64's own Deserialize also takes integers, so `bytes_per_token = 3` reads.
        let bytes_per_token = f64::deserialize(deserializer)?;
        Self::from_bytes_per_token(bytes_per_token).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for BytesPerToken {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("BytesPerToken")
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "number",
            "minimum": Self::MIN.bytes_per_token(),
            "maximum": Self::MAX.bytes_per_token(),
        })
    }
}
