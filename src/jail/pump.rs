//! Moves bytes between the supervisor and a running child: feeds stdin,
//! collects or streams stdout/stderr up to a cap (reading and discarding
//! the rest, so the supervisor's memory stays bounded whatever the child
//! prints), and enforces the wall-clock deadline and the caller's cancel.
//!
//! One loop ([`pump_call`]) for every call: a jailed child behind its
//! pidfd ([`run`]), and a call a warm worker runs behind its control
//! channel (`crate::run::warm`), each a [`Supervised`]. The limits a call
//! ran into are assembled once too ([`limits_hit`]).

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::poll::{poll, ppoll, PollFd, PollFlags, PollTimeout};
use nix::sys::time::TimeSpec;

use super::cancel::{self, Cancel};
use super::cgroup::CallGroup;
use super::spec::{LimitHit, Output};
use super::sys;

/// One output stream of the child.
pub struct Sink {
    fd: Option<std::fs::File>,
    /// Bytes kept (capture mode).
    pub kept: Vec<u8>,
    /// Bytes the child wrote in total.
    pub total: u64,
    cap: u64,
    mode: Output,
    /// 1 or 2: where streamed bytes go.
    target: i32,
    target_broken: bool,
}

impl Sink {
    /// A sink reading from `fd`, keeping or streaming up to `cap` bytes.
    pub fn new(fd: OwnedFd, cap: u64, mode: Output, target: i32) -> io::Result<Sink> {
        sys::set_nonblocking(fd.as_raw_fd())?;
        Ok(Sink {
            fd: Some(std::fs::File::from(fd)),
            kept: Vec::new(),
            total: 0,
            cap,
            mode,
            target,
            target_broken: false,
        })
    }

    /// True when more was written than kept.
    pub fn truncated(&self) -> bool {
        self.total > self.cap
    }

    /// Reads what is available; closes the fd at end of file. Returns the
    /// bytes read.
    fn drain(&mut self, buf: &mut [u8]) -> usize {
        let mut got = 0;
        loop {
            let Some(file) = self.fd.as_mut() else {
                return got;
            };
            match file.read(buf) {
                Ok(0) => {
                    self.fd = None;
                    return got;
                }
                Ok(n) => {
                    got += n;
                    self.accept(&buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return got,
                Err(_) => {
                    self.fd = None;
                    return got;
                }
            }
        }
    }

    fn accept(&mut self, data: &[u8]) {
        let room = self.cap.saturating_sub(self.total);
        let take = (data.len() as u64).min(room) as usize;
        self.total += data.len() as u64;
        if take == 0 {
            return;
        }
        match self.mode {
            Output::Capture => self.kept.extend_from_slice(&data[..take]),
            Output::Stream => {
                if self.target_broken {
                    return;
                }
                let r = if self.target == 1 {
                    io::stdout().lock().write_all(&data[..take])
                } else {
                    io::stderr().lock().write_all(&data[..take])
                };
                if r.is_err() {
                    self.target_broken = true;
                }
            }
        }
    }
}

/// A round that read less than this while the child runs on is followed
/// by [`BATCH_WAIT`]: a child writing many small blocks (`find`, a test
/// runner's progress) woke the pump for each 4 KiB block — a third of the
/// jail's cost on `find`'s output — and is now read in batches. A child
/// writing faster fills the pipe past it and is read without a pause.
const BATCH: usize = 32 * 1024;
/// The pause after a small round (ended early by the call's end): short enough that a person reading the
/// stream sees no delay.
const BATCH_WAIT: std::time::Duration = std::time::Duration::from_micros(500);

/// How long to keep reading after the first process ended.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// What the pump saw.
pub struct Pumped {
    /// The deadline passed and the tree was killed.
    pub timed_out: bool,
    /// The caller cancelled and the tree was killed.
    pub cancelled: bool,
}

/// What a pump supervises: the call's process, which it waits for, and
/// stops at the deadline or on the caller's cancel.
pub trait Supervised {
    /// Whether the deadline still stops it once it has ended (the pipes
    /// still open): a jailed child's tree may outlive its first process.
    const STOP_AFTER_END: bool;
    /// Readable when it has ended or has something to say.
    fn fd(&self) -> BorrowedFd<'_>;
    /// [`Supervised::fd`] was readable: whether it has now ended.
    fn readable(&mut self) -> bool;
    /// The deadline passed or the caller cancelled: stop it. `false` when
    /// it cannot be told, and is then taken as ended.
    fn stop(&mut self) -> bool;
    /// Asked each round once stopped, with when: `true` to stop waiting
    /// for it and take it as ended.
    fn give_up(&mut self, _stopped: Instant) -> bool {
        false
    }
    /// How long to wait, at most, between checks once stopped.
    fn tick(&self) -> Duration {
        Duration::from_millis(100)
    }
}

/// A jailed child behind its pidfd, stopped with `stop`.
struct Child<'a> {
    pidfd: &'a OwnedFd,
    stop: i32,
}

impl Supervised for Child<'_> {
    const STOP_AFTER_END: bool = true;

    fn fd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    fn readable(&mut self) -> bool {
        true
    }

    fn stop(&mut self) -> bool {
        // Killing the first process ends its PID namespace: the kernel
        // kills every other process in it; without one, `stop` tells
        // the call's reaper to kill every descendant.
        let _ = sys::pidfd_signal(self.pidfd.as_raw_fd(), self.stop);
        true
    }
}

/// Runs until the child behind `pidfd` has exited and both outputs reached
/// end of file, sending it `stop` at `deadline` or as soon as `cancel` is
/// set (checked every [`cancel::POLL_INTERVAL`]).
pub fn run(
    pidfd: &OwnedFd,
    stop: i32,
    stdin: Option<(OwnedFd, Vec<u8>)>,
    out: &mut Sink,
    err: &mut Sink,
    deadline: Instant,
    cancel: Option<&Cancel>,
) -> io::Result<Pumped> {
    pump_call(
        &mut Child { pidfd, stop },
        stdin,
        out,
        err,
        deadline,
        cancel,
    )
}

/// Runs until `call` has ended and both outputs reached end of file (or
/// [`EXIT_GRACE`] after its end), feeding it `stdin`, stopping it at
/// `deadline` or as soon as `cancel` is set (checked every
/// [`cancel::POLL_INTERVAL`]).
pub fn pump_call<S: Supervised>(
    call: &mut S,
    stdin: Option<(OwnedFd, Vec<u8>)>,
    out: &mut Sink,
    err: &mut Sink,
    deadline: Instant,
    cancel: Option<&Cancel>,
) -> io::Result<Pumped> {
    let mut stdin = match stdin {
        Some((fd, data)) => {
            sys::set_nonblocking(fd.as_raw_fd())?;
            Some((std::fs::File::from(fd), data, 0usize))
        }
        None => None,
    };
    let mut exited: Option<Instant> = None;
    let mut stopped: Option<Instant> = None;
    let mut timed_out = false;
    let mut cancelled = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if let Some(at) = exited {
            if out.fd.is_none() && err.fd.is_none() {
                break;
            }
            // Without a PID namespace (degraded mode) an escaped process
            // could hold the pipes open: stop reading after a grace period.
            if at.elapsed() > EXIT_GRACE {
                out.fd = None;
                err.fd = None;
                break;
            }
        }
        let now = Instant::now();
        let mut stop = false;
        if !timed_out && now >= deadline && (S::STOP_AFTER_END || exited.is_none()) {
            timed_out = true;
            stop = true;
        }
        if !timed_out && !cancelled && exited.is_none() && cancel.is_some_and(Cancel::is_cancelled)
        {
            cancelled = true;
            stop = true;
        }
        if stop {
            stopped.get_or_insert(now);
            if !call.stop() && exited.is_none() {
                exited = Some(now);
            }
        }
        if let (Some(at), None) = (stopped, exited) {
            if call.give_up(at) {
                exited = Some(now);
            }
        }
        let timeout = if timed_out || cancelled {
            PollTimeout::try_from(call.tick().as_millis() as i32).unwrap_or(PollTimeout::MAX)
        } else {
            let mut left = deadline.saturating_duration_since(now).as_millis();
            if cancel.is_some() {
                left = left.min(cancel::POLL_INTERVAL.as_millis());
            }
            PollTimeout::try_from(left.min(60_000) as i32 + 1).unwrap_or(PollTimeout::MAX)
        };
        let mut fds: Vec<PollFd> = Vec::with_capacity(4);
        let mut slots = [usize::MAX; 4];
        if exited.is_none() {
            slots[0] = fds.len();
            fds.push(PollFd::new(call.fd(), PollFlags::POLLIN));
        }
        if let Some(fd) = &out.fd {
            slots[1] = fds.len();
            fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
        }
        if let Some(fd) = &err.fd {
            slots[2] = fds.len();
            fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
        }
        if let Some((f, _, _)) = &stdin {
            slots[3] = fds.len();
            fds.push(PollFd::new(f.as_fd(), PollFlags::POLLOUT));
        }
        match poll(&mut fds, timeout) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        let ready = |i: usize| {
            slots[i] != usize::MAX && fds[slots[i]].revents().is_some_and(|r| !r.is_empty())
        };
        let (r_exit, r_out, r_err, r_in) = (ready(0), ready(1), ready(2), ready(3));
        drop(fds);
        if r_exit && exited.is_none() && call.readable() {
            exited = Some(Instant::now());
        }
        let mut got = 0;
        if r_out {
            got += out.drain(&mut buf);
        }
        if r_err {
            got += err.drain(&mut buf);
        }
        if r_in {
            let mut done = false;
            if let Some((f, data, pos)) = &mut stdin {
                match f.write(&data[*pos..]) {
                    Ok(n) => {
                        *pos += n;
                        done = *pos >= data.len();
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // The child closed its stdin (or never reads it).
                    Err(_) => done = true,
                }
            }
            if done {
                stdin = None;
            }
        }
        if got > 0 && got < BATCH && exited.is_none() && !timed_out && !cancelled {
            // Let small writes gather, but not past the call's end: a
            // call that printed and exited is seen at once.
            let mut end = [PollFd::new(call.fd(), PollFlags::POLLIN)];
            let _ = ppoll(&mut end, Some(TimeSpec::from_duration(BATCH_WAIT)), None);
        }
        if exited.is_some() {
            // Nothing more will be read from stdin.
            stdin = None;
            // Every writer is gone once the first process has ended (its
            // namespace is torn down), so the pipes reach end of file.
            out.drain(&mut buf);
            err.drain(&mut buf);
        }
    }
    Ok(Pumped {
        timed_out,
        cancelled,
    })
}

/// The limits a call ran into: its wall time (`timed_out`), its call
/// group's memory and process limits, and the output cap of either
/// stream.
pub fn limits_hit(
    timed_out: bool,
    group: Option<&CallGroup>,
    out: &Sink,
    err: &Sink,
) -> Vec<LimitHit> {
    let mut limits_hit = Vec::new();
    if timed_out {
        limits_hit.push(LimitHit::Timeout);
    }
    if let Some(g) = group {
        if g.memory_exceeded() {
            limits_hit.push(LimitHit::Memory);
        }
        if g.pids_exceeded() {
            limits_hit.push(LimitHit::Pids);
        }
    }
    if out.truncated() || err.truncated() {
        limits_hit.push(LimitHit::Output);
    }
    limits_hit
}
