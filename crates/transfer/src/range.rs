//! `Range` requests: which bytes of a file one `Range` header asks for.

use axum::http::HeaderValue;

/// Which bytes of a file of `size` a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// The whole file (no range, or one that is ignored).
    Whole,
    /// First and last byte, inclusive.
    Part(u64, u64),
    /// Outside the file: 416.
    Unsatisfiable,
}

/// The span of one `Range` header (see the module docs).
pub fn span(range: Option<&HeaderValue>, if_range: bool, size: u64) -> Span {
    let Some(spec) = range.and_then(|r| r.to_str().ok()) else {
        return Span::Whole;
    };
    let spec = spec.trim();
    if if_range || spec.len() < 6 || !spec[..6].eq_ignore_ascii_case("bytes=") {
        return Span::Whole;
    }
    let spec = spec[6..].trim();
    if spec.contains(',') {
        return Span::Whole;
    }
    let Some((first, last)) = spec.split_once('-') else {
        return Span::Whole;
    };
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
    };
    match (first.trim(), last.trim()) {
        ("", n) => match number(n) {
            None => Span::Whole,
            Some(0) => Span::Unsatisfiable,
            Some(_) if size == 0 => Span::Unsatisfiable,
            Some(n) => Span::Part(size - n.min(size), size - 1),
        },
        (a, "") => match number(a) {
            None => Span::Whole,
            Some(a) if a >= size => Span::Unsatisfiable,
            Some(a) => Span::Part(a, size - 1),
        },
        (a, b) => match (number(a), number(b)) {
            (Some(a), Some(b)) if b >= a => {
                if a >= size {
                    Span::Unsatisfiable
                } else {
                    Span::Part(a, b.min(size - 1))
                }
            }
            _ => Span::Whole,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let v = |s: &str| HeaderValue::from_str(s).unwrap();
        let s = |r: &str, size| span(Some(&v(r)), false, size);
        assert_eq!(span(None, false, 10), Span::Whole);
        assert_eq!(s("bytes=0-0", 10), Span::Part(0, 0));
        assert_eq!(s("bytes=2-5", 10), Span::Part(2, 5));
        assert_eq!(s("bytes=2-", 10), Span::Part(2, 9));
        assert_eq!(s("bytes=9-9", 10), Span::Part(9, 9));
        assert_eq!(s("bytes=5-100", 10), Span::Part(5, 9));
        assert_eq!(s("bytes=-3", 10), Span::Part(7, 9));
        assert_eq!(s("bytes=-30", 10), Span::Part(0, 9));
        assert_eq!(s("BYTES=1-1", 10), Span::Part(1, 1));
        assert_eq!(s("bytes=10-", 10), Span::Unsatisfiable);
        assert_eq!(s("bytes=10-20", 10), Span::Unsatisfiable);
        assert_eq!(s("bytes=-0", 10), Span::Unsatisfiable);
        assert_eq!(s("bytes=0-", 0), Span::Unsatisfiable);
        assert_eq!(s("bytes=-1", 0), Span::Unsatisfiable);
        for ignored in ["bytes=0-1,3-4", "bytes=5-2", "items=0-1", "bytes=x-1", "bytes=+1-2"] {
            assert_eq!(s(ignored, 10), Span::Whole, "{ignored}");
        }
        assert_eq!(span(Some(&v("bytes=0-1")), true, 10), Span::Whole);
    }
}
