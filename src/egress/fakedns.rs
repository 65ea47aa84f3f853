//! Fake addresses for allowed names (pure): transparent egress answers a
//! jail's DNS question for a name it may reach with an address of the
//! reserved 198.18.0.0/15 (RFC 2544, benchmarking: no real host has
//! one), and maps a connection to that address back to the name. The
//! decision is then made on the name, exactly as the proxy makes it on
//! a `CONNECT`; the jail never learns a real address, so nothing it does
//! to DNS (rebinding, a second answer) changes where it goes.
//!
//! Each call has its own table, so an address means one name for the
//! whole call; addresses are handed out in order and never reused.

use std::collections::HashMap;
use std::net::Ipv4Addr;

/// The reserved range: 198.18.0.0/15.
pub const RANGE: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 18, 0, 0), 15);

/// The jail's own address on its TUN device (never handed out).
pub const JAIL_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

/// The first address handed out; those below it are glovebox's own (the
/// jail's address, and room for more).
const FIRST: u32 = u32::from_be_bytes([198, 18, 0, 16]);

/// Names one call may have an address for; past that a question gets
/// "refused" (a tool looking up names in a loop cannot grow the table).
pub const MAX_NAMES: usize = 4096;

/// The name ↔ address table of one call.
#[derive(Debug, Default)]
pub struct FakeDns {
    by_name: HashMap<String, Ipv4Addr>,
    by_addr: HashMap<Ipv4Addr, String>,
}

impl FakeDns {
    /// An empty table.
    pub fn new() -> FakeDns {
        FakeDns::default()
    }

    /// The address of `name` (lowercase, without the trailing dot): the
    /// one it already has, or the next free one; `None` once
    /// [`MAX_NAMES`] names have one. The caller decides first whether
    /// the name may have one at all.
    pub fn address_for(&mut self, name: &str) -> Option<Ipv4Addr> {
        if let Some(a) = self.by_name.get(name) {
            return Some(*a);
        }
        if self.by_name.len() >= MAX_NAMES {
            return None;
        }
        let next = FIRST.checked_add(u32::try_from(self.by_name.len()).ok()?)?;
        let addr = Ipv4Addr::from(next);
        if !in_range(addr) {
            return None;
        }
        self.by_name.insert(name.to_string(), addr);
        self.by_addr.insert(addr, name.to_string());
        Some(addr)
    }

    /// The name `addr` was handed out for, if it was.
    pub fn name_of(&self, addr: Ipv4Addr) -> Option<&str> {
        self.by_addr.get(&addr).map(String::as_str)
    }

    /// How many names have an address.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True when no name has an address yet.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// True for an address of [`RANGE`].
pub fn in_range(addr: Ipv4Addr) -> bool {
    let mask = u32::MAX << (32 - RANGE.1);
    u32::from(addr) & mask == u32::from(RANGE.0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_name_keeps_its_address_and_maps_back() {
        let mut d = FakeDns::new();
        let a = d.address_for("pypi.org").unwrap();
        let b = d.address_for("files.pythonhosted.org").unwrap();
        assert_ne!(a, b);
        assert_eq!(d.address_for("pypi.org"), Some(a));
        assert_eq!(d.name_of(a), Some("pypi.org"));
        assert_eq!(d.name_of(b), Some("files.pythonhosted.org"));
        assert!(in_range(a) && in_range(b));
        assert_ne!(a, JAIL_ADDR);
        // An address never handed out, in the range or not, is no name.
        assert_eq!(d.name_of(Ipv4Addr::new(198, 18, 0, 200)), None);
        assert_eq!(d.name_of(JAIL_ADDR), None);
        assert_eq!(d.name_of(Ipv4Addr::new(127, 0, 0, 1)), None);
    }

    #[test]
    fn the_table_is_bounded() {
        let mut d = FakeDns::new();
        for i in 0..MAX_NAMES {
            assert!(d.address_for(&format!("h{i}.example")).is_some());
        }
        assert_eq!(d.address_for("one-more.example"), None);
        // Names already in it still answer.
        assert!(d.address_for("h0.example").is_some());
        assert_eq!(d.len(), MAX_NAMES);
    }

    #[test]
    fn the_range_is_198_18_slash_15() {
        assert!(in_range(Ipv4Addr::new(198, 18, 0, 0)));
        assert!(in_range(Ipv4Addr::new(198, 19, 255, 255)));
        assert!(!in_range(Ipv4Addr::new(198, 20, 0, 0)));
        assert!(!in_range(Ipv4Addr::new(198, 17, 255, 255)));
    }
}
