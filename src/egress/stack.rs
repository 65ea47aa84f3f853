//! The user-space TCP of transparent egress: smoltcp's, driven by one
//! future per call that owns the TUN device, the stack and every
//! connection's socket ([`Stack`]). Each connection the jail opens (a
//! SYN [`super::transparent`] passed) gets a socket listening on exactly
//! its destination; the decision (by name, [`super::transparent`]) is made
//! on another task, which hands back the connected host socket or a
//! refusal. Bytes then move between the smoltcp socket and the host
//! socket in the same poll that moves packets: a segment crosses no
//! channel, no other task and no buffer of its own.
//!
//! Sockets acknowledge at once (no delayed ACK: smoltcp's fixed 10 ms
//! would stall a client whose Nagle waits for it) and send at once (no
//! Nagle: the relay already writes whole reads).

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::net::SocketAddrV4;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Checksum, Device, DeviceCapabilities, Medium, RxToken, TxToken};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration as SmolDuration, Instant as SmolInstant};
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, Ipv4Address};
use tokio::io::unix::AsyncFd;
use tokio::net::TcpStream;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::budget::Charge;
use super::log::Entry;

/// Each socket's buffers, each way (its window: tens of microseconds of
/// round trip here): 512 KiB per connection, charged to the call's
/// egress budget ([`CONNECTION_BYTES`], [`super::budget`]) before the
/// socket is made; past the budget a connection is reset.
pub const BUFFER: usize = 256 << 10;

/// The memory one connection is charged: its two buffers and its
/// socket's own state.
pub const CONNECTION_BYTES: u64 = 2 * BUFFER as u64 + 4096;

/// Packets waiting for the device, at most (then the stack holds back).
const MAX_QUEUED: usize = 1024;

/// Packets read from the device per round, and rounds per poll, before
/// the task lets the runtime run something else.
const BATCH: usize = 64;
const ROUNDS: usize = 8;

/// Reads or writes per socket and direction in one pass.
const MOVES: usize = 16;

/// How long a socket may wait for the handshake its SYN began.
const HANDSHAKE: SmolDuration = SmolDuration::from_secs(10);

/// A connection opened: its id and destination, to be decided.
pub type Opened = (u64, SocketAddrV4);

/// A connection decided: its id and the connected host socket with its
/// log entry, or `None` when refused.
pub type Decided = (u64, Option<(TcpStream, Arc<Entry>)>);

/// The judge of each packet from the jail.
pub type Decide = Box<dyn FnMut(&[u8]) -> Ingress + Send>;

/// What the device side decides about one packet from the jail.
pub enum Ingress {
    /// To the stack.
    Pass,
    /// To the stack, opening a connection to this destination, with its
    /// charge (held for as long as the connection is).
    Open(SocketAddrV4, Charge),
    /// Answered with this packet, straight back to the jail.
    Reply(Vec<u8>),
    /// Dropped.
    Drop,
}

/// Packet buffers kept for reuse, at most (each one device packet long,
/// 64 KiB: 1 MiB per call kept at most).
const MAX_FREE: usize = 16;

/// One packet: `buf[..len]`. Its buffer goes back to [`Pool`] once the
/// packet is consumed, so a packet costs no allocation and no zeroing
/// once the stack is running.
struct Packet {
    buf: Vec<u8>,
    len: usize,
}

/// The buffers of packets consumed, for the next ones.
struct Pool {
    free: RefCell<Vec<Vec<u8>>>,
    /// A buffer's size: a device packet.
    size: usize,
}

impl Pool {
    fn take(&self) -> Vec<u8> {
        self.free
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| vec![0u8; self.size])
    }

    fn give(&self, buf: Vec<u8>) {
        let mut free = self.free.borrow_mut();
        if free.len() < MAX_FREE && buf.len() == self.size {
            free.push(buf);
        }
    }
}

/// The packets between the device and the stack.
struct Queues {
    rx: VecDeque<Packet>,
    tx: VecDeque<Packet>,
    pool: Pool,
    mtu: usize,
}

struct Rx<'a>(Packet, &'a Pool);
struct Tx<'a>(&'a mut VecDeque<Packet>, &'a Pool);

impl RxToken for Rx<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let Rx(packet, pool) = self;
        let r = f(&packet.buf[..packet.len]);
        pool.give(packet.buf);
        r
    }
}

impl TxToken for Tx<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let Tx(queue, pool) = self;
        let mut buf = pool.take();
        if buf.len() < len {
            buf.resize(len, 0);
        }
        let r = f(&mut buf[..len]);
        queue.push_back(Packet { buf, len });
        r
    }
}

impl Device for Queues {
    type RxToken<'a> = Rx<'a>;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _: SmolInstant) -> Option<(Rx<'_>, Tx<'_>)> {
        if self.tx.len() >= MAX_QUEUED {
            return None;
        }
        let packet = self.rx.pop_front()?;
        Some((Rx(packet, &self.pool), Tx(&mut self.tx, &self.pool)))
    }

    fn transmit(&mut self, _: SmolInstant) -> Option<Tx<'_>> {
        (self.tx.len() < MAX_QUEUED).then_some(Tx(&mut self.tx, &self.pool))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ip;
        c.max_transmission_unit = self.mtu;
        // Packets from the jail's own kernel are not verified again (a
        // pass over every byte); those to it are checksummed, as its
        // kernel verifies them.
        c.checksum.ipv4 = Checksum::Tx;
        c.checksum.tcp = Checksum::Tx;
        c
    }
}

/// Where a connection's bytes go.
enum Upstream {
    /// Not decided yet: the tool's bytes wait in the socket.
    Waiting,
    /// The host socket, and the log entry that counts the bytes.
    Open(TcpStream, Arc<Entry>),
    /// Refused: the tool's side is closed.
    Refused,
}

/// One connection.
struct Conn {
    handle: SocketHandle,
    upstream: Upstream,
    opened: SmolInstant,
    /// The handshake is done.
    established: bool,
    /// The tool's end of stream was passed on (the host socket's write
    /// half shut).
    shut: bool,
    /// The host's end of stream was seen (the socket closing).
    eof: bool,
    /// Seen closed once: removed the next time (after the stack had a
    /// poll to send the reset an abort queued).
    closed: bool,
    /// Its descriptors and buffers, charged to the call until it is
    /// removed.
    _charge: Charge,
}

/// The stack of one call; a future that runs until the device fails.
pub struct Stack {
    tun: Arc<AsyncFd<OwnedFd>>,
    decide: Decide,
    opened: UnboundedSender<Opened>,
    decided: UnboundedReceiver<Decided>,
    next_id: u64,
    iface: Interface,
    device: Queues,
    sockets: SocketSet<'static>,
    conns: HashMap<u64, Conn>,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// A connection's buffers were made (worth giving back to the kernel
    /// once they are freed).
    made_buffers: bool,
}

impl Stack {
    /// A stack on `tun` (MTU `mtu`): `decide` judges each packet from the
    /// jail; each connection opened is sent on `opened`, and its decision
    /// comes back on `decided`.
    pub fn new(
        tun: Arc<AsyncFd<OwnedFd>>,
        mtu: usize,
        decide: Decide,
        opened: UnboundedSender<Opened>,
        decided: UnboundedReceiver<Decided>,
    ) -> Stack {
        let mut device = Queues {
            rx: VecDeque::new(),
            tx: VecDeque::new(),
            pool: Pool {
                free: RefCell::new(Vec::new()),
                size: mtu.max(1500) + 64,
            },
            mtu,
        };
        let mut config = Config::new(HardwareAddress::Ip);
        config.random_seed = u64::from_ne_bytes(rand_seed());
        let mut iface = Interface::new(config, &mut device, SmolInstant::now());
        // Any destination is ours (each socket listens on exactly its
        // own): an address of its own and a default route make smoltcp
        // answer for all of them.
        iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(IpAddress::v4(0, 0, 0, 1), 0));
        });
        let _ = iface
            .routes_mut()
            .add_default_ipv4_route(Ipv4Address::new(0, 0, 0, 1));
        iface.set_any_ip(true);
        Stack {
            tun,
            decide,
            opened,
            decided,
            next_id: 0,
            iface,
            device,
            sockets: SocketSet::new(vec![]),
            conns: HashMap::new(),
            timer: Box::pin(tokio::time::sleep(std::time::Duration::ZERO)),
            made_buffers: false,
        }
    }

    /// Whether any connection's buffers were made.
    pub fn held_buffers(&self) -> bool {
        self.made_buffers
    }

    /// A socket listening on `dst`, and its connection holding `charge`
    /// (none past [`super::MAX_CONNECTIONS`]: with no socket listening,
    /// the SYN is answered with a reset).
    fn open(&mut self, dst: SocketAddrV4, charge: Charge, now: SmolInstant) {
        if self.conns.len() >= super::MAX_CONNECTIONS {
            return;
        }
        self.made_buffers = true;
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0u8; BUFFER]),
            tcp::SocketBuffer::new(vec![0u8; BUFFER]),
        );
        s.set_ack_delay(None);
        s.set_nagle_enabled(false);
        if s.listen(dst).is_err() {
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        if self.opened.send((id, dst)).is_err() {
            return;
        }
        let handle = self.sockets.add(s);
        self.conns.insert(
            id,
            Conn {
                handle,
                upstream: Upstream::Waiting,
                opened: now,
                established: false,
                shut: false,
                eof: false,
                closed: false,
                _charge: charge,
            },
        );
    }

    /// Takes the decisions made since the last poll; true when any came.
    fn take_decisions(&mut self, cx: &mut Context<'_>) -> bool {
        let mut any = false;
        while let Poll::Ready(Some((id, decided))) = self.decided.poll_recv(cx) {
            any = true;
            // A connection already over drops its host socket here.
            if let Some(conn) = self.conns.get_mut(&id) {
                conn.upstream = match decided {
                    Some((stream, entry)) => Upstream::Open(stream, entry),
                    None => Upstream::Refused,
                };
            }
        }
        any
    }

    /// Reads what the device has (up to [`BATCH`] packets); true when it
    /// read any.
    fn read_device(&mut self, cx: &mut Context<'_>, now: SmolInstant) -> io::Result<bool> {
        let mut any = false;
        for _ in 0..BATCH {
            // The stack has not taken what was read: no more until it has
            // (at most a batch of packets waits).
            if self.device.rx.len() >= BATCH {
                break;
            }
            let mut guard = match self.tun.poll_read_ready(cx) {
                Poll::Ready(r) => r?,
                Poll::Pending => break,
            };
            // Read straight into the packet's own buffer (no copy after).
            let mut buf = self.device.pool.take();
            let n =
                match guard.try_io(|fd| nix::unistd::read(fd, &mut buf).map_err(io::Error::from)) {
                    Ok(r) => r?,
                    Err(_would_block) => {
                        self.device.pool.give(buf);
                        continue;
                    }
                };
            any = true;
            match (self.decide)(&buf[..n]) {
                Ingress::Pass => self.device.rx.push_back(Packet { buf, len: n }),
                Ingress::Open(dst, charge) => {
                    self.open(dst, charge, now);
                    self.device.rx.push_back(Packet { buf, len: n });
                }
                // A full device drops it: DNS is asked again, a SYN resent.
                Ingress::Reply(p) => {
                    self.device.pool.give(buf);
                    let len = p.len();
                    self.device.tx.push_back(Packet { buf: p, len });
                }
                Ingress::Drop => self.device.pool.give(buf),
            }
        }
        Ok(any)
    }

    /// Writes what the stack sent; true when it wrote any.
    fn write_device(&mut self, cx: &mut Context<'_>) -> io::Result<bool> {
        let mut any = false;
        while let Some(packet) = self.device.tx.front() {
            let mut guard = match self.tun.poll_write_ready(cx) {
                Poll::Ready(r) => r?,
                Poll::Pending => break,
            };
            let bytes = &packet.buf[..packet.len];
            match guard.try_io(|fd| nix::unistd::write(fd, bytes).map_err(io::Error::from)) {
                Ok(Ok(_)) => {}
                // A packet the device refuses is lost, as on a wire.
                Ok(Err(e)) if e.kind() != io::ErrorKind::WouldBlock => {}
                _ => continue,
            }
            if let Some(sent) = self.device.tx.pop_front() {
                self.device.pool.give(sent.buf);
            }
            any = true;
        }
        Ok(any)
    }

    /// Moves bytes between each socket and its host socket; drops the
    /// connections that are over. True when anything moved.
    fn shuttle(&mut self, cx: &mut Context<'_>, now: SmolInstant) -> bool {
        let mut moved = false;
        let mut over = Vec::new();
        for (&id, conn) in self.conns.iter_mut() {
            let s = self.sockets.get_mut::<tcp::Socket>(conn.handle);
            moved |= shuttle_one(s, conn, cx);
            let done = match s.state() {
                tcp::State::Closed => std::mem::replace(&mut conn.closed, true),
                tcp::State::TimeWait => conn.shut || matches!(conn.upstream, Upstream::Refused),
                tcp::State::Listen | tcp::State::SynReceived => now - conn.opened > HANDSHAKE,
                _ => false,
            };
            if done {
                over.push(id);
            }
        }
        for id in over {
            if let Some(conn) = self.conns.remove(&id) {
                self.sockets.remove(conn.handle);
            }
        }
        moved
    }
}

/// What one read or write of a socket did.
enum Moved {
    Bytes(usize),
    /// Nothing now (the other side is not ready).
    Nothing,
    /// End of stream, or an error: this direction is over.
    End,
}

/// Bytes of one connection, both ways; true when any moved.
fn shuttle_one(s: &mut tcp::Socket<'static>, conn: &mut Conn, cx: &mut Context<'_>) -> bool {
    let mut moved = false;
    if !conn.established && !matches!(s.state(), tcp::State::Listen | tcp::State::SynReceived) {
        conn.established = true;
    }
    let (up, entry) = match &conn.upstream {
        Upstream::Waiting => return false,
        Upstream::Refused => {
            if !conn.eof {
                // Closed at once: a client waiting for the server to speak
                // first sees the end; one that sends anyway is reset.
                conn.eof = true;
                s.close();
                moved = true;
            }
            if s.can_recv() {
                s.abort();
            }
            return moved;
        }
        Upstream::Open(up, entry) => (up, entry),
    };
    // The tool's bytes, to the host.
    for _ in 0..MOVES {
        if conn.shut || !s.can_recv() {
            break;
        }
        match up.poll_write_ready(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(_)) => {
                s.abort();
                return true;
            }
            Poll::Pending => break,
        }
        let r = s.recv(|data| match up.try_write(data) {
            Ok(n) => (n, Moved::Bytes(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => (0, Moved::Nothing),
            Err(_) => (0, Moved::End),
        });
        match r {
            Ok(Moved::Bytes(n)) => {
                entry.add_sent(n as u64);
                moved = true;
            }
            Ok(Moved::Nothing) => {}
            Ok(Moved::End) | Err(_) => {
                // The host is gone: the tool's connection is cut.
                s.abort();
                return true;
            }
        }
    }
    // The tool's end of stream, once all its bytes went on.
    if conn.established && !conn.shut && !s.may_recv() {
        conn.shut = true;
        let _ = nix::sys::socket::shutdown(
            std::os::fd::AsRawFd::as_raw_fd(up),
            nix::sys::socket::Shutdown::Write,
        );
        moved = true;
    }
    // The host's bytes, to the tool.
    for _ in 0..MOVES {
        if !conn.established || conn.eof || !s.can_send() {
            break;
        }
        match up.poll_read_ready(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(_)) => {
                conn.eof = true;
                s.close();
                moved = true;
                break;
            }
            Poll::Pending => break,
        }
        let r = s.send(|space| match up.try_read(space) {
            Ok(0) => (0, Moved::End),
            Ok(n) => (n, Moved::Bytes(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => (0, Moved::Nothing),
            Err(_) => (0, Moved::End),
        });
        match r {
            Ok(Moved::Bytes(n)) => {
                entry.add_received(n as u64);
                moved = true;
            }
            Ok(Moved::Nothing) => {}
            Ok(Moved::End) => {
                // FIN after what is queued.
                conn.eof = true;
                s.close();
                moved = true;
            }
            Err(_) => break,
        }
    }
    moved
}

impl Future for Stack {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut now = SmolInstant::now();
        let mut busy = true;
        for _ in 0..ROUNDS {
            now = SmolInstant::now();
            let mut progress = this.read_device(cx, now)?;
            progress |= this.take_decisions(cx);
            let _ = this.iface.poll(now, &mut this.device, &mut this.sockets);
            progress |= this.shuttle(cx, now);
            let _ = this.iface.poll(now, &mut this.device, &mut this.sockets);
            progress |= this.write_device(cx)?;
            if !progress {
                busy = false;
                break;
            }
        }
        if busy {
            // Still work to do: yield, and come back at once.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if let Some(d) = this.iface.poll_delay(now, &this.sockets) {
            let d = std::time::Duration::from_micros(d.total_micros());
            if d.is_zero() {
                cx.waker().wake_by_ref();
            } else {
                this.timer.as_mut().reset(tokio::time::Instant::now() + d);
                let _ = this.timer.as_mut().poll(cx);
            }
        }
        Poll::Pending
    }
}

/// Eight random bytes for smoltcp's initial sequence numbers.
fn rand_seed() -> [u8; 8] {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    b
}
