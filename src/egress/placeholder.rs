//! Placeholder secrets: the tool holds a stand-in, the supervisor the
//! real value (`permissions.secrets.NAME.hosts`).
//!
//! A placeholder has the real value's length and shape: a kind prefix
//! (`ghp_`, `sk-proj-`) is kept, then each ASCII lowercase letter,
//! uppercase letter and digit of the value is replaced by a random one of
//! its kind and every other byte is kept (a UTF-8 value stays UTF-8), so a client that checks a token's
//! format still accepts it and a body that carries it keeps its length
//! (`Content-Length` holds after a swap). It is drawn from the kernel's
//! random pool for every call: two calls never share one.
//!
//! A [`Swapper`] replaces byte strings of equal length in place, across
//! the chunks of a stream; the interception ([`super::intercept`]) uses
//! one per request: placeholder → real value towards a secret's own
//! hosts, and a count (no change) of a placeholder that goes anywhere
//! else. What comes back goes through a [`Hider`] ([`Placeholders::hider`]),
//! which finds the real value in every form a server may reflect it.
//!
//! Everything here is pure apart from drawing the random bytes.

use std::fmt;

use super::reflect::Hider;
use crate::net::{Allowlist, Host};

/// Fewest letters and digits a placeholder secret's value must have: the
/// placeholder's randomness comes from them.
pub const MIN_RANDOM_CHARS: usize = 8;

/// Errors making a call's placeholders.
#[derive(Debug, thiserror::Error)]
pub enum PlaceholderError {
    /// The value has too few letters and digits to hide behind a
    /// placeholder of its shape.
    #[error("secret {name} has fewer than {MIN_RANDOM_CHARS} letters and digits, too few for a placeholder of its length; use the real token, or remove `hosts` from permissions.secrets.{name} to hand the value to the tool")]
    TooShort {
        /// The secret.
        name: String,
    },
    /// The kernel's random pool could not be read.
    #[error("cannot draw random bytes for the placeholder of secret {name}: {why}; check that getrandom(2) works here")]
    Random {
        /// The secret.
        name: String,
        /// Why.
        why: String,
    },
    /// An `inject` header name or format is unusable.
    #[error("permissions.secrets.{name}.inject: {why}; use a header name such as `Authorization` and a format such as `Bearer {{}}`")]
    Inject {
        /// The secret.
        name: String,
        /// Why.
        why: &'static str,
    },
}

/// `inject`: a header set on every request to the secret's hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inject {
    /// Header name.
    pub header: String,
    /// Value, `{}` standing for the real secret.
    pub format: String,
}

/// One placeholder secret of a call.
#[derive(Clone)]
pub struct Secret {
    name: String,
    real: String,
    placeholder: String,
    hosts: Allowlist,
    inject: Option<Inject>,
    body: bool,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the values.
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .field("inject", &self.inject.as_ref().map(|i| &i.header))
            .field("body", &self.body)
            .finish()
    }
}

/// A placeholder for `real` drawn from `random` (at least as many bytes
/// as `real` has letters and digits; rejection sampling may need more
/// and draws them from `more`).
pub fn shaped(real: &str, random: &mut dyn FnMut() -> u8) -> String {
    let mut out = Vec::with_capacity(real.len());
    let mut pick = |n: u8| -> u8 {
        // Uniform over 0..n: refuse the bytes above the last full cycle.
        let limit = 256 - (256 % u16::from(n));
        loop {
            let b = random();
            if u16::from(b) < limit {
                return b % n;
            }
        }
    };
    let keep = kept_prefix(real);
    out.extend_from_slice(&real.as_bytes()[..keep]);
    for b in real.bytes().skip(keep) {
        out.push(match b {
            b'a'..=b'z' => b'a' + pick(26),
            b'A'..=b'Z' => b'A' + pick(26),
            b'0'..=b'9' => b'0' + pick(10),
            other => other,
        });
    }
    // Only ASCII letters and digits changed, into ASCII letters and
    // digits: the bytes are still valid UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// Longest kind prefix a token may carry (`ghp_`, `sk-proj-`, `xoxb-`).
pub const MAX_KEPT_PREFIX: usize = 12;

/// The length of the prefix kept as it is: up to the last `_` or `-`
/// within the first [`MAX_KEPT_PREFIX`] bytes, when at least
/// [`MIN_RANDOM_CHARS`] letters and digits follow it.
fn kept_prefix(real: &str) -> usize {
    let head = &real.as_bytes()[..real.len().min(MAX_KEPT_PREFIX)];
    match head.iter().rposition(|b| *b == b'_' || *b == b'-') {
        Some(i) if random_chars(&real[i + 1..]) >= MIN_RANDOM_CHARS => i + 1,
        _ => 0,
    }
}

fn random_chars(value: &str) -> usize {
    value.bytes().filter(u8::is_ascii_alphanumeric).count()
}

impl Secret {
    /// A placeholder secret named `name` with the real value `real`, for
    /// `hosts`; its placeholder is drawn now.
    pub fn new(
        name: &str,
        real: &str,
        hosts: Allowlist,
        inject: Option<Inject>,
        body: bool,
    ) -> Result<Secret, PlaceholderError> {
        if random_chars(real) < MIN_RANDOM_CHARS {
            return Err(PlaceholderError::TooShort { name: name.into() });
        }
        if let Some(i) = &inject {
            let bad = |why| PlaceholderError::Inject {
                name: name.into(),
                why,
            };
            if hyper::header::HeaderName::from_bytes(i.header.as_bytes()).is_err() {
                return Err(bad("the header name is not a valid HTTP header name"));
            }
            if !i.format.contains("{}") {
                return Err(bad("the format has no `{}` for the value"));
            }
            if hyper::header::HeaderValue::from_str(&i.format.replace("{}", real)).is_err() {
                return Err(bad("the header value would hold characters HTTP refuses"));
            }
        }
        let failed: std::cell::RefCell<Option<String>> = std::cell::RefCell::new(None);
        let mut pool = Vec::new();
        let mut random = || loop {
            if let Some(b) = pool.pop() {
                return b;
            }
            let mut fresh = [0u8; 64];
            if let Err(e) = getrandom::fill(&mut fresh) {
                failed.borrow_mut().get_or_insert(e.to_string());
                // Never a guessable placeholder: the call fails below.
                return 0;
            }
            pool.extend_from_slice(&fresh);
        };
        let mut placeholder = shaped(real, &mut random);
        while placeholder == real && failed.borrow().is_none() {
            placeholder = shaped(real, &mut random);
        }
        if let Some(why) = failed.take() {
            return Err(PlaceholderError::Random {
                name: name.into(),
                why,
            });
        }
        Ok(Secret {
            name: name.into(),
            real: real.into(),
            placeholder,
            hosts,
            inject,
            body,
        })
    }

    /// The secret's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stand-in the tool gets.
    pub fn placeholder(&self) -> &str {
        &self.placeholder
    }

    /// True when `host`:`port` is one of the secret's hosts.
    pub fn for_host(&self, host: &Host, port: u16) -> bool {
        self.hosts.permits(host, port)
    }

    /// The header to set on requests to the secret's hosts, with the real
    /// value in it.
    pub fn injected(&self) -> Option<(&str, String)> {
        self.inject
            .as_ref()
            .map(|i| (i.header.as_str(), i.format.replace("{}", &self.real)))
    }
}

/// The placeholder secrets of one call.
#[derive(Debug, Clone, Default)]
pub struct Placeholders {
    secrets: Vec<Secret>,
}

/// What a swap rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Placeholder → real value (towards one of the secret's hosts).
    Swapped,
    /// Placeholder left as it is, counted (anywhere else).
    Refused,
}

/// One rule of a [`Swapper`].
#[derive(Debug, Clone)]
struct Rule {
    from: Vec<u8>,
    to: Vec<u8>,
    secret: usize,
    action: Action,
    count: u64,
}

impl Placeholders {
    /// A call's placeholder secrets.
    pub fn new(secrets: Vec<Secret>) -> Placeholders {
        Placeholders { secrets }
    }

    /// True when the call has none.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// The secrets.
    pub fn iter(&self) -> impl Iterator<Item = &Secret> {
        self.secrets.iter()
    }

    /// True when some secret is meant for `host`:`port` (its connections
    /// are intercepted).
    pub fn any_for(&self, host: &Host, port: u16) -> bool {
        self.secrets.iter().any(|s| s.for_host(host, port))
    }

    /// What goes to `host`:`port`: the placeholder of each secret meant
    /// for it swapped for its value (in bodies only when `body` and the
    /// secret opted in), every other placeholder counted.
    pub fn outbound(&self, host: &Host, port: u16, body: bool) -> Swapper {
        let rules = self
            .secrets
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let swap = s.for_host(host, port) && (!body || s.body);
                Rule {
                    from: s.placeholder.as_bytes().to_vec(),
                    to: if swap {
                        s.real.as_bytes().to_vec()
                    } else {
                        s.placeholder.as_bytes().to_vec()
                    },
                    secret: i,
                    action: if swap {
                        Action::Swapped
                    } else {
                        Action::Refused
                    },
                    count: 0,
                }
            })
            .collect();
        Swapper::new(rules)
    }

    /// What comes back: every real value, in every form a server may
    /// write it, turned into its placeholder or refused
    /// ([`super::reflect`]); its counts are per secret index.
    pub fn hider(&self) -> Hider {
        let pairs: Vec<(&[u8], &[u8])> = self
            .secrets
            .iter()
            .map(|s| (s.real.as_bytes(), s.placeholder.as_bytes()))
            .collect();
        Hider::new(&pairs)
    }

    /// The secrets whose placeholder appears in `bytes` (a request to a
    /// host none of them is meant for), with how often.
    pub fn seen(&self, bytes: &[u8]) -> Vec<(&str, u64)> {
        self.secrets
            .iter()
            .filter_map(|s| {
                let n = memchr::memmem::find_iter(bytes, s.placeholder.as_bytes()).count() as u64;
                (n > 0).then_some((s.name.as_str(), n))
            })
            .collect()
    }

    /// The secrets meant for `host`:`port` that set a header.
    pub fn injections(&self, host: &Host, port: u16) -> Vec<(&str, &str, String)> {
        self.secrets
            .iter()
            .filter(|s| s.for_host(host, port))
            .filter_map(|s| s.injected().map(|(h, v)| (s.name.as_str(), h, v)))
            .collect()
    }

    /// The name of secret number `i`.
    pub fn name(&self, i: usize) -> &str {
        self.secrets.get(i).map(|s| s.name.as_str()).unwrap_or("")
    }
}

/// Replaces byte strings of equal length, in place, in a stream of
/// chunks: a match cut between two chunks is found too (the last bytes of
/// a chunk wait for the next, [`Swapper::push`]; [`Swapper::finish`]
/// releases them).
#[derive(Debug, Clone)]
pub struct Swapper {
    rules: Vec<Rule>,
    /// Bytes held back: the longest needle minus one.
    keep: usize,
    carry: Vec<u8>,
}

impl Swapper {
    fn new(rules: Vec<Rule>) -> Swapper {
        let keep = rules
            .iter()
            .map(|r| r.from.len())
            .max()
            .unwrap_or(1)
            .saturating_sub(1);
        Swapper {
            rules,
            keep,
            carry: Vec::new(),
        }
    }

    /// Swaps inside `buf` (whole: a header value, a request target).
    pub fn apply(&mut self, buf: &mut [u8]) {
        for r in &mut self.rules {
            if r.from.is_empty() {
                continue;
            }
            let at: Vec<usize> = memchr::memmem::find_iter(buf, &r.from).collect();
            let mut end = 0;
            for i in at {
                // Non-overlapping, left to right.
                if i < end {
                    continue;
                }
                buf[i..i + r.to.len()].copy_from_slice(&r.to);
                end = i + r.from.len();
                r.count += 1;
            }
        }
    }

    /// Takes the next chunk of a stream; returns the bytes ready to send.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(chunk);
        self.apply(&mut buf);
        let ready = buf.len().saturating_sub(self.keep);
        self.carry = buf.split_off(ready);
        buf
    }

    /// The bytes still held back, at the end of the stream.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.carry)
    }

    /// (secret index, action, count) of every rule that matched.
    pub fn counts(&self) -> Vec<(usize, Action, u64)> {
        self.rules
            .iter()
            .filter(|r| r.count > 0)
            .map(|r| (r.secret, r.action, r.count))
            .collect()
    }

    /// Forgets the counts (after they were logged).
    pub fn reset_counts(&mut self) {
        for r in &mut self.rules {
            r.count = 0;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn secret(name: &str, real: &str, hosts: &[&str]) -> Secret {
        Secret::new(name, real, Allowlist::parse(hosts).unwrap(), None, false).unwrap()
    }

    #[test]
    fn placeholders_keep_length_and_shape_and_differ_per_call() {
        let real = "ghp_Ab3dEfGh1jKlMn0pQrStUvWxYz0123456789";
        let a = secret("T", real, &["api.github.com"]);
        let b = secret("T", real, &["api.github.com"]);
        for p in [a.placeholder(), b.placeholder()] {
            assert_eq!(p.len(), real.len());
            assert_ne!(p, real);
            assert!(p.starts_with("ghp_"));
            for (x, y) in p.bytes().zip(real.bytes()) {
                assert_eq!(x.is_ascii_lowercase(), y.is_ascii_lowercase());
                assert_eq!(x.is_ascii_uppercase(), y.is_ascii_uppercase());
                assert_eq!(x.is_ascii_digit(), y.is_ascii_digit());
            }
        }
        assert_ne!(a.placeholder(), b.placeholder());
        let utf8 = secret("U", "clé-secrète-0123456789", &["x.org"]);
        assert_eq!(utf8.placeholder().len(), "clé-secrète-0123456789".len());
        assert!(utf8.placeholder().contains('é'));
    }

    #[test]
    fn short_values_and_bad_injections_are_refused() {
        let hosts = Allowlist::parse(&["x.org"]).unwrap();
        assert!(matches!(
            Secret::new("S", "ab-12-cd", hosts.clone(), None, false),
            Err(PlaceholderError::TooShort { .. })
        ));
        let inject = |h: &str, f: &str| {
            Some(Inject {
                header: h.into(),
                format: f.into(),
            })
        };
        for i in [inject("Bad Header", "{}"), inject("X-Token", "Bearer")] {
            assert!(matches!(
                Secret::new("S", "abcdefgh12345678", hosts.clone(), i, false),
                Err(PlaceholderError::Inject { .. })
            ));
        }
        let s = Secret::new(
            "S",
            "abcdefgh12345678",
            hosts,
            inject("Authorization", "Bearer {}"),
            false,
        )
        .unwrap();
        assert_eq!(
            s.injected(),
            Some(("Authorization", "Bearer abcdefgh12345678".to_string()))
        );
        assert!(!format!("{s:?}").contains("abcdefgh"));
    }

    #[test]
    fn swaps_only_towards_the_secrets_hosts() {
        let p = Placeholders::new(vec![
            secret("A", "tokenAAAAaaaa1111", &["a.example:443"]),
            secret("B", "tokenBBBBbbbb2222", &["b.example"]),
        ]);
        let (pa, pb) = (
            p.iter().next().unwrap().placeholder().to_string(),
            p.iter().nth(1).unwrap().placeholder().to_string(),
        );
        let host = Host::parse("a.example").unwrap();
        let mut sw = p.outbound(&host, 443, false);
        let mut head = format!("Bearer {pa} and {pb}").into_bytes();
        sw.apply(&mut head);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            format!("Bearer tokenAAAAaaaa1111 and {pb}")
        );
        assert_eq!(
            sw.counts(),
            [(0, Action::Swapped, 1), (1, Action::Refused, 1)]
        );
        // Another port of the same name is not one of A's hosts.
        let mut sw = p.outbound(&host, 80, false);
        let mut head = pa.clone().into_bytes();
        sw.apply(&mut head);
        assert_eq!(head, pa.as_bytes());
        // Bodies only for secrets that opted in.
        let mut sw = p.outbound(&host, 443, true);
        let mut body = pa.clone().into_bytes();
        sw.apply(&mut body);
        assert_eq!(body, pa.as_bytes());
        assert_eq!(sw.counts(), [(0, Action::Refused, 1)]);
        assert_eq!(p.seen(format!("x{pb}y{pb}").as_bytes()), [("B", 2)]);
    }

    #[test]
    fn a_stream_swaps_matches_cut_between_chunks() {
        let p = Placeholders::new(vec![Secret::new(
            "A",
            "tokenAAAAaaaa1111",
            Allowlist::parse(&["h.example"]).unwrap(),
            None,
            true,
        )
        .unwrap()]);
        let pa = p.iter().next().unwrap().placeholder().to_string();
        let host = Host::parse("h.example").unwrap();
        let text = format!("{{\"k\":\"{pa}\",\"again\":\"{pa}\"}}");
        for cut in 1..text.len() {
            let mut sw = p.outbound(&host, 443, true);
            let mut out = sw.push(&text.as_bytes()[..cut]);
            out.extend(sw.push(&text.as_bytes()[cut..]));
            out.extend(sw.finish());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                text.replace(&pa, "tokenAAAAaaaa1111"),
                "cut at {cut}"
            );
        }
        // And back: the real value becomes the placeholder.
        let mut back = p.hider();
        let mut out = back.push(b"echo tokenAAAA").unwrap();
        out.extend(back.push(b"aaaa1111!").unwrap());
        out.extend(back.finish().unwrap());
        assert_eq!(String::from_utf8(out).unwrap(), format!("echo {pa}!"));
        assert_eq!(back.counts(), [1]);
    }
}
