//! The end of stdin as a cancellation: a reader that cancels a token when
//! the stream it reads ends (EOF) or fails.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// `inner`, cancelling `end` once it reports EOF or an error.
pub(crate) struct CancelAtEnd<R> {
    inner: R,
    end: CancellationToken,
}

impl<R> CancelAtEnd<R> {
    pub(crate) fn new(inner: R, end: CancellationToken) -> Self {
        Self { inner, end }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for CancelAtEnd<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &polled {
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {
                self.end.cancel();
            }
            Poll::Ready(Err(_)) => self.end.cancel(),
            _ => {}
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn the_token_is_cancelled_at_the_end_and_not_before() {
        let end = CancellationToken::new();
        let mut reader = CancelAtEnd::new(&b"one line\n"[..], end.clone());
        let mut first = [0u8; 4];
        reader.read_exact(&mut first).await.unwrap();
        assert!(!end.is_cancelled(), "cancelled with bytes still to read");
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"line\n");
        assert!(end.is_cancelled(), "not cancelled at the end");
    }

    #[tokio::test]
    async fn an_empty_buffer_is_not_an_end() {
        let end = CancellationToken::new();
        let mut reader = CancelAtEnd::new(&b"data"[..], end.clone());
        let mut none = [0u8; 0];
        assert_eq!(reader.read(&mut none).await.unwrap(), 0);
        assert!(!end.is_cancelled());
    }
}
