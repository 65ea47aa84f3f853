//! The bodies of an intercepted exchange, streamed: a response's through
//! the [`Hider`] (a value written back becomes the placeholder, or the
//! body is cut), a request's through the [`Swapper`] (the placeholder
//! becomes the value, for the secret's hosts only).

use super::*;

/// A response body with every value hidden: the part read ahead (already
/// hidden) first, then the rest streamed through the [`Hider`]; a value
/// that cannot be hidden ends it with an error (the client sees the
/// response cut, the log says why). The counts are logged when it is
/// dropped.
pub struct HideBody<B> {
    pub(super) inner: B,
    pub(super) hider: Hider,
    pub(super) queue: VecDeque<Frame<Bytes>>,
    pub(super) done: bool,
    /// The head declared the length.
    pub(super) fixed: bool,
    /// The exact length of a body read whole.
    pub(super) exact: Option<u64>,
    pub(super) x: Arc<Exchange>,
}

impl<B> Drop for HideBody<B> {
    fn drop(&mut self) {
        self.x.hidden(&mut self.hider);
    }
}

impl<B> HideBody<B> {
    fn cut(&mut self, r: Refused) -> BoxError {
        self.done = true;
        self.queue.clear();
        self.x.refused(r).into()
    }
}

impl<B> Body for HideBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Some(f) = this.queue.pop_front() {
            return Poll::Ready(Some(Ok(f)));
        }
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.done = true;
                    match this.hider.finish() {
                        Ok(rest) if !rest.is_empty() => {
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))))
                        }
                        Ok(_) => {}
                        Err(r) => return Poll::Ready(Some(Err(this.cut(r)))),
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e.into())));
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => match this.hider.push(&data) {
                        Ok(out) if !out.is_empty() => {
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))))
                        }
                        Ok(_) => {}
                        Err(r) => return Poll::Ready(Some(Err(this.cut(r)))),
                    },
                    Err(frame) => {
                        this.done = true;
                        let rest = match this.hider.finish() {
                            Ok(rest) => rest,
                            Err(r) => return Poll::Ready(Some(Err(this.cut(r)))),
                        };
                        if let Ok(mut t) = frame.into_trailers() {
                            if let Err(r) = hide_headers(&mut t, &mut this.hider) {
                                return Poll::Ready(Some(Err(this.cut(r))));
                            }
                            this.queue.push_back(Frame::trailers(t));
                        }
                        if !rest.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
                        }
                        if let Some(f) = this.queue.pop_front() {
                            return Poll::Ready(Some(Ok(f)));
                        }
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.queue.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact {
            Some(n) => SizeHint::with_exact(n),
            None if self.fixed => self.inner.size_hint(),
            None => SizeHint::default(),
        }
    }
}

/// A body streamed through a [`Swapper`] (equal lengths: its size is the
/// inner body's); the counts are logged when it is dropped.
pub struct SwapBody<B> {
    inner: B,
    swapper: Swapper,
    held: Option<Frame<Bytes>>,
    done: bool,
    x: Arc<Exchange>,
}

impl<B> SwapBody<B> {
    pub(super) fn new(inner: B, swapper: Swapper, x: Arc<Exchange>) -> SwapBody<B> {
        SwapBody {
            inner,
            swapper,
            held: None,
            done: false,
            x,
        }
    }
}

impl<B> Drop for SwapBody<B> {
    fn drop(&mut self) {
        self.x.tally(&self.swapper);
    }
}

impl<B> Body for SwapBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        if let Some(f) = this.held.take() {
            return Poll::Ready(Some(Ok(f)));
        }
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.done = true;
                    let rest = this.swapper.finish();
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        let out = this.swapper.push(&data);
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                        }
                    }
                    Err(trailers) => {
                        let rest = this.swapper.finish();
                        if rest.is_empty() {
                            return Poll::Ready(Some(Ok(trailers)));
                        }
                        this.held = Some(trailers);
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.held.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
