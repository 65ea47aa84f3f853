//! The socket-diagnostics query behind [`super`]: which local socket is
//! the other end of a TCP connection, and who owns it, asked of the
//! kernel over `NETLINK_SOCK_DIAG` (an `inet_diag` exact lookup, what
//! `ss` uses; no privilege needed).
//!
//! One netlink socket per query: the kernel answers while the request is
//! being sent, so the answer is read without blocking (none there is an
//! error, never a wait).

use std::net::SocketAddr;

use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_REQUEST};
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_sys::protocols::NETLINK_SOCK_DIAG;
use netlink_sys::{Socket, SocketAddr as NetlinkAddr};

use super::Found;

/// Why the kernel could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum DiagError {
    /// The netlink socket could not be made or used.
    #[error("socket diagnostics (NETLINK_SOCK_DIAG) failed while {what}")]
    Socket {
        /// What was being done.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The kernel's answer could not be read.
    #[error("socket diagnostics (NETLINK_SOCK_DIAG) gave an answer that cannot be read: {0}")]
    Answer(String),
}

/// `SOCK_DIAG_BY_FAMILY`'s "any cookie": the socket is found by its
/// addresses alone.
const NO_COOKIE: [u8; 8] = [0xff; 8];

/// The socket whose local end is `local` and whose remote end is
/// `remote` (on this machine, in this network namespace): its owner, its
/// inode (0 once no process holds it) and its TCP state; `None` when no
/// such socket exists (it was closed).
pub fn socket(local: SocketAddr, remote: SocketAddr) -> Result<Option<Found>, DiagError> {
    let family = if local.is_ipv4() && remote.is_ipv4() {
        AF_INET
    } else {
        AF_INET6
    };
    let (local_ip, remote_ip) = if family == AF_INET6 {
        (to_v6(local), to_v6(remote))
    } else {
        (local.ip(), remote.ip())
    };
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST;
    let mut packet = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::all(),
            socket_id: SocketId {
                source_port: local.port(),
                destination_port: remote.port(),
                source_address: local_ip,
                destination_address: remote_ip,
                interface_id: 0,
                cookie: NO_COOKIE,
            },
        })
        .into(),
    );
    packet.finalize();
    let mut request = vec![0; packet.buffer_len()];
    packet.serialize(&mut request);

    let io = |what| move |source| DiagError::Socket { what, source };
    let mut socket = Socket::new(NETLINK_SOCK_DIAG).map_err(io("opening its socket"))?;
    socket.bind_auto().map_err(io("binding its socket"))?;
    socket
        .connect(&NetlinkAddr::new(0, 0))
        .map_err(io("connecting to the kernel"))?;
    socket.send(&request, 0).map_err(io("sending the query"))?;
    // Answered while it was sent: nothing to wait for.
    socket
        .set_non_blocking(true)
        .map_err(io("reading the answer"))?;
    let mut answer = Vec::with_capacity(8192);
    socket
        .recv(&mut answer, 0)
        .map_err(io("reading the answer"))?;
    let message = NetlinkMessage::<SockDiagMessage>::deserialize(&answer)
        .map_err(|e| DiagError::Answer(e.to_string()))?;
    match message.payload {
        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
            let h = &r.header;
            // The socket asked for, and no other (a listener found in
            // its place is not the connection's end).
            let same = h.socket_id.source_port == local.port()
                && h.socket_id.destination_port == remote.port();
            Ok(same.then_some(Found {
                uid: h.uid,
                inode: h.inode,
                state: h.state,
            }))
        }
        NetlinkPayload::Error(e) => match e.code.map(|c| -c.get()) {
            Some(libc::ENOENT) => Ok(None),
            Some(code) => Err(DiagError::Socket {
                what: "looking the socket up",
                source: std::io::Error::from_raw_os_error(code),
            }),
            None => Ok(None),
        },
        other => Err(DiagError::Answer(format!(
            "unexpected message type {}",
            other.message_type()
        ))),
    }
}

/// `addr`'s address as IPv6 (an IPv4 one mapped), for an `AF_INET6` query.
fn to_v6(addr: SocketAddr) -> std::net::IpAddr {
    match addr {
        SocketAddr::V4(a) => a.ip().to_ipv6_mapped().into(),
        SocketAddr::V6(a) => (*a.ip()).into(),
    }
}
