//! [`JsonRefusals`]: the connection as hyper sees it, so that the answers
//! hyper writes on its own (a request it cannot parse: 400, a URI over
//! 64 KiB: 414, headers over its buffer: 431) carry a JSON body like every
//! other refusal. hyper writes those with `content-length: 0` and no
//! handler ever sees the request; this wrapper recognises such an answer
//! in the byte stream (status 400, 414 or 431, an empty body, no
//! content type: glovebox's own answers always have a body) and writes it
//! again with the error object.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection whose bodiless 400/414/431 answers get a JSON body.
#[derive(Debug)]
pub struct JsonRefusals<T> {
    inner: T,
    /// A rewritten answer still to be written, and how much of it was.
    pending: Option<(Vec<u8>, usize)>,
}

impl<T> JsonRefusals<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        JsonRefusals {
            inner,
            pending: None,
        }
    }
}

/// The answer `head` (a whole bodiless response head) with a JSON body, if
/// it is one of hyper's own refusals.
pub fn rewrite(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let rest = text.strip_prefix("HTTP/1.1 ")?;
    let (status, message) = match rest.get(..3)? {
        "400" => (
            "400 Bad Request",
            "the request could not be parsed as HTTP/1.1",
        ),
        "414" => (
            "414 URI Too Long",
            "the request's URI is longer than the server accepts (64 KiB)",
        ),
        "431" => (
            "431 Request Header Fields Too Large",
            "the request's headers are larger than the server accepts",
        ),
        _ => return None,
    };
    if !text.ends_with("\r\n\r\n") {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    if !lower.contains("\r\ncontent-length: 0\r\n") || lower.contains("\r\ncontent-type:") {
        return None;
    }
    let body = serde_json::json!({
        "error": {"kind": "input_invalid", "message": message, "details": {}}
    })
    .to_string();
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for line in text.split("\r\n").skip(1) {
        let l = line.to_ascii_lowercase();
        if line.is_empty() || l.starts_with("content-length:") || l.starts_with("connection:") {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

impl<T: AsyncWrite + Unpin> JsonRefusals<T> {
    /// Writes what is pending; Ready(Ok) once nothing is.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = &mut self.pending {
            if *done == bytes.len() {
                self.pending = None;
                break;
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *done += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for JsonRefusals<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for JsonRefusals<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.drain(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        if buf.starts_with(b"HTTP/1.1 4") {
            if let Some(out) = rewrite(buf) {
                self.pending = Some((out, 0));
                // The whole head is taken; the rewritten answer goes out
                // from here and on flush.
                let _ = self.drain(cx);
                return Poll::Ready(Ok(buf.len()));
            }
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.inner).poll_shutdown(cx),
            other => other,
        }
    }

    fn is_write_vectored(&self) -> bool {
        // One buffer per write, so that an answer's head is seen whole.
        false
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hypers_refusals_get_a_json_body() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Mon, 23 Nov 2026 14:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(rewrite(head).unwrap()).unwrap();
        let (h, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(h.starts_with("HTTP/1.1 431 "), "{out}");
        assert!(h.contains("content-type: application/json"), "{out}");
        assert!(
            h.contains(&format!("content-length: {}", body.len())),
            "{out}"
        );
        assert!(h.contains("date: Mon"), "{out}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["kind"], "input_invalid");
        for keep in [
            &b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n",
            b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
        ] {
            assert!(rewrite(keep).is_none(), "{:?}", String::from_utf8_lossy(keep));
        }
    }
}
