//! Paths written as shell words, so a printed repro line runs as it is pasted.
//!
//! A repro line (`coordsim run PATH --seed N`) names a scenario file, and a path may
//! hold spaces, quotes, `$`, newlines, or bytes that are not UTF-8. [`quote_path`]
//! writes it the way a POSIX shell (bash, zsh, dash for the first two forms) reads
//! back the same bytes:
//!
//! - as it is, when every byte is in `A-Z a-z 0-9 - _ . / , : + @ %`, as most paths
//!   are, so the common repro line is unchanged;
//! - in single quotes when it is UTF-8 without control characters (a `'` inside
//!   becomes `'\''`);
//! - otherwise in bash's and zsh's `$'…'` form, every byte outside printable ASCII
//!   written `\xNN`, so a path that is not UTF-8 still reruns.

use std::path::Path;

/// `path` as one shell word: see the module header.
pub fn quote_path(path: &Path) -> String {
    quote_bytes(path.as_os_str().as_encoded_bytes())
}

/// `bytes` as one shell word.
pub fn quote_bytes(bytes: &[u8]) -> String {
    let plain = |byte: &u8| byte.is_ascii_alphanumeric() || b"-_./,:+@%".contains(byte);
    if !bytes.is_empty() && bytes.iter().all(plain) {
        return String::from_utf8(bytes.to_vec()).expect("ASCII is UTF-8");
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        if !text.chars().any(char::is_control) {
            return format!("'{}'", text.replace('\'', r"'\''"));
        }
    }
    let mut word = String::from("$'");
    for &byte in bytes {
        match byte {
            b'\\' => word.push_str(r"\\"),
            b'\'' => word.push_str(r"\'"),
            b' '..=b'~' => word.push(char::from(byte)),
            _ => word.push_str(&format!(r"\x{byte:02x}")),
        }
    }
    word.push('\'');
    word
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_are_left_as_they_are() {
        // Goal: the usual repro line does not change.
        assert_eq!(
            quote_bytes(b"scenarios/core/notify-once.toml"),
            "scenarios/core/notify-once.toml"
        );
        assert_eq!(quote_bytes(b""), "''");
        assert_eq!(
            quote_bytes(b"my scenario's.toml"),
            r"'my scenario'\''s.toml'"
        );
        assert_eq!(quote_bytes(b"a\xffb\n"), r"$'a\xffb\x0a'");
    }

    #[test]
    fn bash_reads_every_quoted_word_back_as_its_bytes() {
        // Goal: issue 24's non-UTF-8 path gets a repro line a shell can run.
        // Method: bash prints each quoted word back; the bytes must match.
        let Ok(_) = std::process::Command::new("bash")
            .arg("-c")
            .arg("true")
            .status()
        else {
            return; // No bash on this machine: the forms are checked above.
        };
        let words: [&[u8]; 7] = [
            b"plain/path.toml",
            b"with space.toml",
            b"it's $HOME `x` \"q\" \\.toml",
            b"caf\xc3\xa9.toml",
            b"bad\xff\xfe.toml",
            b"new\nline\ttab.toml",
            b"-dash~tilde*glob?.toml",
        ];
        for word in words {
            let script = format!("printf %s {}", quote_bytes(word));
            let output = std::process::Command::new("bash")
                .arg("-c")
                .arg(&script)
                .output()
                .unwrap();
            assert_eq!(output.stdout, word, "{script}");
        }
    }
}
