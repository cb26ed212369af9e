//! A small, stable, non-cryptographic digest.
//!
//! FNV-1a (64-bit) is used wherever the runtime or the simulator needs a fingerprint
//! that is identical on every platform and every run: scratchpad versions, trace
//! hashes. It is not collision-resistant against an adversary, and is not used where
//! that matters.

/// An incremental FNV-1a 64-bit hasher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv1a64 {
    state: u64,
}

impl Fnv1a64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;

    /// A hasher with no input yet.
    pub const fn new() -> Self {
        Self {
            state: Self::OFFSET_BASIS,
        }
    }

    /// Feeds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.state ^= u64::from(*byte);
            self.state = self.state.wrapping_mul(Self::PRIME);
        }
    }

    /// The digest of everything fed so far.
    pub const fn finish(&self) -> u64 {
        self.state
    }

    /// The digest of everything fed so far as 16 lowercase hex digits, the text
    /// `format!("{:016x}", digest)` gives, written without the formatting machinery:
    /// traces name every mailbox message by its digest.
    pub fn finish_hex(&self) -> String {
        const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";
        let text: Vec<u8> = (0..16)
            .rev()
            .map(|nibble| HEX_DIGITS[((self.state >> (nibble * 4)) & 0xf) as usize])
            .collect();
        String::from_utf8(text).expect("hex digits are ASCII")
    }

    /// The digest of `bytes`.
    pub fn digest(bytes: &[u8]) -> u64 {
        let mut hasher = Self::new();
        hasher.update(bytes);
        hasher.finish()
    }
}

impl Default for Fnv1a64 {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::Fnv1a64;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_hex_digest_is_what_formatting_writes(bytes in any::<Vec<u8>>()) {
            let mut hasher = Fnv1a64::new();
            hasher.update(&bytes);
            prop_assert_eq!(hasher.finish_hex(), format!("{:016x}", hasher.finish()));
        }
    }

    #[test]
    fn the_hex_digest_keeps_leading_zeros() {
        let hasher = Fnv1a64 { state: 0xab };
        assert_eq!(hasher.finish_hex(), "00000000000000ab");
    }

    #[test]
    fn matches_the_published_test_vectors() {
        // Goal: the digest is standard FNV-1a 64, so other tools can recompute it.
        assert_eq!(Fnv1a64::digest(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(Fnv1a64::digest(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(Fnv1a64::digest(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn incremental_updates_equal_one_digest() {
        // Goal: feeding in pieces gives the digest of the whole.
        let mut hasher = Fnv1a64::new();
        hasher.update(b"foo");
        hasher.update(b"bar");
        assert_eq!(hasher.finish(), Fnv1a64::digest(b"foobar"));
    }
}
