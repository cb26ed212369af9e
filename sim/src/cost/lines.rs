//! The lines of a transcript, read in chunks so that memory holds one chunk and the
//! longest line, never a whole file: a user's transcripts run to gigabytes, and single
//! files to hundreds of megabytes.

use std::io::{ErrorKind, Read};

/// The UTF-8 byte order mark.
const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";

/// Bytes read from a file at a time: large enough that a read costs little per byte,
/// small enough to stay in a core's cache while its lines are parsed.
pub const CHUNK_BYTES: usize = 256 * 1024;

/// The largest buffer kept from one file to the next.
const GROWN_BYTES_MAX: usize = 4 * CHUNK_BYTES;

/// Splits what a reader yields into lines, with a buffer reused from one file to the
/// next. The buffer holds [`CHUNK_BYTES`], or while a file is read its longest line if
/// that is longer.
#[derive(Debug, Default)]
pub struct LineReader {
    buffer: Vec<u8>,
}

impl LineReader {
    /// A reader with no buffer yet.
    pub fn new() -> LineReader {
        LineReader::default()
    }

    /// Calls `each(line_number, line)` for every line `reader` yields, numbered from 1,
    /// without its `\n`; a last line without one counts too. A byte order mark before
    /// the first line is not part of it.
    pub fn for_each_line<R: Read>(
        &mut self,
        reader: R,
        each: impl FnMut(usize, &[u8]),
    ) -> std::io::Result<()> {
        let result = self.read_lines(reader, each);
        // A buffer grown for one long line goes back to a chunk, so that one such line
        // does not hold memory through every file after it.
        if self.buffer.len() > GROWN_BYTES_MAX {
            self.buffer = Vec::new();
        }
        result
    }

    fn read_lines<R: Read>(
        &mut self,
        mut reader: R,
        mut each: impl FnMut(usize, &[u8]),
    ) -> std::io::Result<()> {
        if self.buffer.len() < CHUNK_BYTES {
            self.buffer.resize(CHUNK_BYTES, 0);
        }
        let mut lines = Lines::new();
        // `buffer[..filled]` holds bytes read but not yet passed on: the start of a line
        // whose end is still to come.
        let mut filled = 0;
        loop {
            if filled == self.buffer.len() {
                // One line longer than the buffer: grow it to hold the line whole.
                self.buffer.resize(self.buffer.len() * 2, 0);
            }
            let read = match reader.read(&mut self.buffer[filled..]) {
                Ok(read) => read,
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            };
            if read == 0 {
                lines.finish(&self.buffer[..filled], &mut each);
                return Ok(());
            }
            let end = filled + read;
            // Only the new bytes can hold the end of the pending line.
            let consumed = lines.split(&self.buffer[..end], filled, &mut each);
            self.buffer.copy_within(consumed..end, 0);
            filled = end - consumed;
        }
    }
}

/// Calls `each(line_number, line)` for every line of `bytes`, as
/// [`LineReader::for_each_line`] does for a reader.
pub fn for_each_line_in(bytes: &[u8], mut each: impl FnMut(usize, &[u8])) {
    let mut lines = Lines::new();
    let consumed = lines.split(bytes, 0, &mut each);
    lines.finish(&bytes[consumed..], &mut each);
}

/// Line numbering and the byte order mark across the chunks of one file.
struct Lines {
    number: usize,
}

impl Lines {
    fn new() -> Lines {
        Lines { number: 0 }
    }

    /// Passes on each complete line of `bytes`, whose first `scanned` bytes are known to
    /// hold no `\n`, and returns how many bytes it passed on.
    fn split(
        &mut self,
        bytes: &[u8],
        scanned: usize,
        each: &mut impl FnMut(usize, &[u8]),
    ) -> usize {
        let mut start = 0;
        let mut from = scanned;
        while let Some(offset) = memchr::memchr(b'\n', &bytes[from..]) {
            let end = from + offset;
            self.pass(&bytes[start..end], each);
            start = end + 1;
            from = start;
        }
        start
    }

    /// Passes on the last line, which has no `\n`, unless it is empty.
    fn finish(&mut self, rest: &[u8], each: &mut impl FnMut(usize, &[u8])) {
        if !rest.is_empty() {
            self.pass(rest, each);
        }
    }

    fn pass(&mut self, line: &[u8], each: &mut impl FnMut(usize, &[u8])) {
        self.number += 1;
        // A byte order mark opens some files written on Windows; it is not data.
        let line = if self.number == 1 {
            line.strip_prefix(BYTE_ORDER_MARK).unwrap_or(line)
        } else {
            line
        };
        each(self.number, line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn collect_in(bytes: &[u8]) -> Vec<(usize, Vec<u8>)> {
        let mut lines = Vec::new();
        for_each_line_in(bytes, |number, line| lines.push((number, line.to_vec())));
        lines
    }

    /// A reader that yields at most `step` bytes a call, and sometimes is interrupted.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
        calls: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls % 3 == 0 {
                return Err(ErrorKind::Interrupted.into());
            }
            let n = self.step.min(out.len()).min(self.bytes.len());
            out[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    fn collect_read(bytes: &[u8], step: usize, reader: &mut LineReader) -> Vec<(usize, Vec<u8>)> {
        let mut lines = Vec::new();
        let trickle = Trickle {
            bytes,
            step,
            calls: 0,
        };
        reader
            .for_each_line(trickle, |number, line| lines.push((number, line.to_vec())))
            .unwrap();
        lines
    }

    #[test]
    fn lines_are_numbered_and_the_last_needs_no_newline() {
        // Goal: `\n` ends a line; an empty line is a line; a last line without `\n`
        // counts, and a final `\n` adds no empty line after it.
        let lines = collect_in(b"a\n\nbc\r\nd");
        let want: Vec<(usize, Vec<u8>)> = vec![
            (1, b"a".to_vec()),
            (2, b"".to_vec()),
            (3, b"bc\r".to_vec()),
            (4, b"d".to_vec()),
        ];
        assert_eq!(lines, want);
        assert_eq!(collect_in(b"a\n").len(), 1);
        assert!(collect_in(b"").is_empty());
    }

    #[test]
    fn a_byte_order_mark_is_dropped_from_the_first_line_only() {
        // Goal: the mark opens a file, not a line; elsewhere it is data.
        let lines = collect_in(b"\xEF\xBB\xBF{}\n\xEF\xBB\xBF{}");
        assert_eq!(lines[0].1, b"{}");
        assert_eq!(lines[1].1, b"\xEF\xBB\xBF{}");
    }

    #[test]
    fn a_line_longer_than_the_buffer_is_passed_whole() {
        // Goal: the buffer grows to the longest line instead of cutting it.
        let long = vec![b'x'; CHUNK_BYTES * 3 + 17];
        let mut text = b"short\n".to_vec();
        text.extend_from_slice(&long);
        text.extend_from_slice(b"\nend");
        let mut reader = LineReader::new();
        let lines = collect_read(&text, CHUNK_BYTES, &mut reader);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1].1, long);
        assert_eq!(lines[2], (3, b"end".to_vec()));
        let huge = vec![b'y'; GROWN_BYTES_MAX + 1];
        assert_eq!(collect_read(&huge, usize::MAX, &mut reader).len(), 1);
        assert!(
            reader.buffer.len() <= GROWN_BYTES_MAX,
            "shrunk after the file"
        );
    }

    proptest! {
        #[test]
        fn reading_in_chunks_gives_the_lines_of_the_whole(
            text in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'a'), Just(0xEF), any::<u8>()], 0..2000),
            step in 1usize..64,
        ) {
            // Goal: however a reader splits the bytes, the lines are those of the whole,
            // and one reader can be reused for the next file.
            let mut reader = LineReader::new();
            prop_assert_eq!(collect_read(&text, step, &mut reader), collect_in(&text));
            prop_assert_eq!(collect_read(&text, step + 1, &mut reader), collect_in(&text));
        }
    }
}
