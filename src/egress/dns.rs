//! The DNS messages of transparent egress (pure): a query read from a
//! UDP datagram the jail sent, and the answer glovebox gives it — an
//! address of [`super::fakedns`], "no such name", or "no record of that
//! type". Only what a stub resolver sends is read: one question, no
//! compression in it; anything else gets no answer at all.

use std::net::Ipv4Addr;

/// Longest DNS name, in bytes on the wire.
const MAX_NAME: usize = 255;

/// `A`, `AAAA` and `ANY` record types; class `IN`.
const TYPE_A: u16 = 1;
const TYPE_ANY: u16 = 255;
const CLASS_IN: u16 = 1;

/// How long a client may keep an answer (the fake address of a name stays
/// the same for the whole call, so caching it does no harm).
pub const TTL: u32 = 60;

/// One question, as the jail asked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The message id, echoed.
    pub id: u16,
    /// Recursion desired, echoed.
    rd: bool,
    /// The name, lowercase, without the trailing dot (as its bytes: a
    /// name that is not ASCII is kept so that it can be refused by name).
    pub name: String,
    /// The record type asked for.
    pub qtype: u16,
    /// The class asked for.
    pub qclass: u16,
    /// The question's bytes, echoed in the answer.
    question: Vec<u8>,
}

impl Query {
    /// True for an `A` (or `ANY`) question of class `IN`: one an address
    /// answers.
    pub fn wants_address(&self) -> bool {
        self.qclass == CLASS_IN && (self.qtype == TYPE_A || self.qtype == TYPE_ANY)
    }
}

/// What glovebox answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// This address.
    Address(Ipv4Addr),
    /// The name exists, with no record of the type asked (`AAAA`, `MX`…).
    NoData,
    /// No such name (`NXDOMAIN`).
    NoSuchName,
    /// Refused (a class other than `IN`, or no address left).
    Refused,
}

/// Reads a query; `None` for anything that is not a standard query with
/// exactly one question.
pub fn parse(msg: &[u8]) -> Option<Query> {
    if msg.len() < 12 {
        return None;
    }
    let id = u16::from_be_bytes([msg[0], msg[1]]);
    let flags = u16::from_be_bytes([msg[2], msg[3]]);
    let qr = flags & 0x8000 != 0;
    let opcode = (flags >> 11) & 0xf;
    let qdcount = u16::from_be_bytes([msg[4], msg[5]]);
    if qr || opcode != 0 || qdcount != 1 {
        return None;
    }
    let mut at = 12;
    let mut name = String::new();
    loop {
        let len = *msg.get(at)? as usize;
        if len == 0 {
            at += 1;
            break;
        }
        // A compression pointer (or a reserved label type): not in a
        // question a stub resolver writes.
        if len & 0xc0 != 0 {
            return None;
        }
        let label = msg.get(at + 1..at + 1 + len)?;
        if !name.is_empty() {
            name.push('.');
        }
        for &b in label {
            name.push(char::from(b).to_ascii_lowercase());
        }
        at += 1 + len;
        if at - 12 > MAX_NAME {
            return None;
        }
    }
    let fixed = msg.get(at..at + 4)?;
    let qtype = u16::from_be_bytes([fixed[0], fixed[1]]);
    let qclass = u16::from_be_bytes([fixed[2], fixed[3]]);
    Some(Query {
        id,
        rd: flags & 0x0100 != 0,
        name,
        qtype,
        qclass,
        question: msg[12..at + 4].to_vec(),
    })
}

/// The answer message to `q`.
pub fn respond(q: &Query, answer: Answer) -> Vec<u8> {
    let rcode: u16 = match answer {
        Answer::Address(_) | Answer::NoData => 0,
        Answer::NoSuchName => 3,
        Answer::Refused => 5,
    };
    // QR, AA, RA; RD echoed.
    let flags: u16 = 0x8000 | 0x0400 | 0x0080 | if q.rd { 0x0100 } else { 0 } | rcode;
    let ancount: u16 = matches!(answer, Answer::Address(_)).into();
    let mut out = Vec::with_capacity(12 + q.question.len() + 16);
    out.extend_from_slice(&q.id.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&ancount.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&q.question);
    if let Answer::Address(a) = answer {
        // The name: a pointer to the question's (offset 12).
        out.extend_from_slice(&[0xc0, 0x0c]);
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&TTL.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&a.octets());
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A query as glibc's stub resolver writes it (with an EDNS record).
    fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&id.to_be_bytes());
        m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1]);
        for label in name.split('.').filter(|l| !l.is_empty()) {
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
        m.push(0);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&1u16.to_be_bytes());
        // OPT pseudo-record.
        m.extend_from_slice(&[0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0]);
        m
    }

    #[test]
    fn a_query_is_read_and_answered_with_its_address() {
        let q = parse(&query(0xbeef, "PyPI.org.", TYPE_A)).unwrap();
        assert_eq!(q.name, "pypi.org");
        assert!(q.wants_address());
        let a = respond(&q, Answer::Address(Ipv4Addr::new(198, 18, 0, 7)));
        assert_eq!(&a[..2], &[0xbe, 0xef]);
        assert_eq!(a[3] & 0x0f, 0, "rcode");
        assert_eq!(a[2] & 0x80, 0x80, "a response");
        assert_eq!(&a[6..8], &[0, 1], "one answer");
        assert_eq!(&a[a.len() - 4..], &[198, 18, 0, 7]);
        // The question is echoed as asked.
        assert_eq!(&a[12..12 + q.question.len()], &q.question[..]);
    }

    #[test]
    fn other_answers_carry_no_record() {
        let q = parse(&query(1, "evil.example", 28)).unwrap();
        assert!(!q.wants_address());
        for (answer, rcode) in [
            (Answer::NoData, 0),
            (Answer::NoSuchName, 3),
            (Answer::Refused, 5),
        ] {
            let a = respond(&q, answer);
            assert_eq!(a[3] & 0x0f, rcode);
            assert_eq!(&a[6..8], &[0, 0]);
            assert_eq!(a.len(), 12 + q.question.len());
        }
    }

    #[test]
    fn anything_but_a_plain_query_is_not_read() {
        let good = query(1, "a.b", TYPE_A);
        assert!(parse(&good).is_some());
        // Too short, a response, another opcode, two questions.
        assert!(parse(&good[..11]).is_none());
        let mut r = good.clone();
        r[2] |= 0x80;
        assert!(parse(&r).is_none());
        let mut r = good.clone();
        r[2] |= 0x10;
        assert!(parse(&r).is_none());
        let mut r = good.clone();
        r[5] = 2;
        assert!(parse(&r).is_none());
        // A compression pointer in the question, a label past the end.
        let mut r = good.clone();
        r[12] = 0xc0;
        assert!(parse(&r).is_none());
        let mut r = good[..14].to_vec();
        r[12] = 60;
        assert!(parse(&r).is_none());
        // Every truncation of a good query is refused or read, never a panic.
        for n in 0..good.len() {
            let _ = parse(&good[..n]);
        }
        // A name over 255 bytes.
        let long = vec!["a".repeat(63); 5].join(".");
        assert!(parse(&query(1, &long, TYPE_A)).is_none());
    }
}
