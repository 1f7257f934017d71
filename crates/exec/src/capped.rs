//! A text sink that keeps the first N Unicode scalar values of a byte stream
//! and counts (but drops) the rest.

/// Decodes UTF-8 incrementally (invalid bytes become U+FFFD, one per
/// maximal invalid sequence as `String::from_utf8_lossy` does), keeps at most
/// `cap` scalar values and never splits one.
#[derive(Debug)]
pub(crate) struct CappedText {
    cap: usize,
    text: String,
    chars: usize,
    /// An incomplete sequence at the end of the last chunk (≤ 3 bytes).
    pending: Vec<u8>,
    truncated: bool,
}

impl CappedText {
    pub(crate) fn new(cap: usize) -> Self {
        Self { cap, text: String::new(), chars: 0, pending: Vec::new(), truncated: false }
    }

    fn full(&self) -> bool {
        self.chars >= self.cap
    }

    fn push_str(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        if self.full() {
            self.truncated = true;
            return;
        }
        let room = self.cap - self.chars;
        match s.char_indices().nth(room) {
            Some((cut, _)) => {
                self.text.push_str(&s[..cut]);
                self.chars += room;
                self.truncated = true;
            }
            None => {
                self.chars += s.chars().count();
                self.text.push_str(s);
            }
        }
    }

    /// Feeds the next bytes of the stream.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        if self.full() {
            // Memory stays flat: nothing more is decoded or kept.
            self.truncated = true;
            self.pending.clear();
            return;
        }
        let joined;
        let mut rest: &[u8] = if self.pending.is_empty() {
            chunk
        } else {
            let mut v = std::mem::take(&mut self.pending);
            v.extend_from_slice(chunk);
            joined = v;
            &joined
        };
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    self.push_str(s);
                    return;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // `good` is valid UTF-8 by construction.
                    self.push_str(std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            self.push_str("\u{FFFD}");
                            rest = &bad[n..];
                        }
                        None => {
                            // Incomplete at the end: wait for more bytes.
                            if !self.full() {
                                self.pending = bad.to_vec();
                            } else {
                                self.truncated = true;
                            }
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The text kept so far and whether anything was dropped, without
    /// ending the stream (an incomplete character at the end is left out).
    pub(crate) fn snapshot(&self) -> (String, bool) {
        (self.text.clone(), self.truncated)
    }

    /// Ends the stream: a dangling incomplete sequence becomes U+FFFD.
    /// Returns the text and whether anything was dropped.
    pub(crate) fn finish(mut self) -> (String, bool) {
        if !self.pending.is_empty() {
            self.pending.clear();
            self.push_str("\u{FFFD}");
        }
        (self.text, self.truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(cap: usize, chunks: &[&[u8]]) -> (String, bool) {
        let mut c = CappedText::new(cap);
        for ch in chunks {
            c.push(ch);
        }
        c.finish()
    }

    #[test]
    fn keeps_exactly_cap_scalars() {
        assert_eq!(feed(3, &[b"abc"]), ("abc".into(), false));
        assert_eq!(feed(3, &[b"abcd"]), ("abc".into(), true));
        assert_eq!(feed(3, &[b"ab", b"c", b"d"]), ("abc".into(), true));
        assert_eq!(feed(3, &[b"abc", b""]), ("abc".into(), false));
    }

    #[test]
    fn multibyte_split_across_chunks_is_joined() {
        let e = "é".as_bytes();
        assert_eq!(feed(10, &[&e[..1], &e[1..]]), ("é".into(), false));
        let crab = "🦀".as_bytes();
        assert_eq!(
            feed(2, &[b"a", &crab[..1], &crab[1..3], &crab[3..], b"b"]),
            ("a🦀".into(), true)
        );
    }

    #[test]
    fn never_splits_at_the_cap() {
        let s = "é".repeat(5);
        let (t, trunc) = feed(3, &[s.as_bytes()]);
        assert_eq!(t, "ééé");
        assert!(trunc);
    }

    #[test]
    fn invalid_bytes_become_replacement_chars() {
        assert_eq!(feed(10, &[b"a\xffb"]), ("a\u{FFFD}b".into(), false));
        // A dangling start byte at the end of the stream.
        assert_eq!(feed(10, &[b"a\xc3"]), ("a\u{FFFD}".into(), false));
        assert_eq!(feed(10, &[b"a\xe2\x82", b"z"]), ("a\u{FFFD}z".into(), false));
    }
}
