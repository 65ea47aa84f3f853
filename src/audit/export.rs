//! Audit that leaves the node: every line this process writes to the
//! audit log is also exported as it is written (one JSON object per line
//! on stdout, for any log collector), and every N lines and at shutdown
//! an Ed25519-signed checkpoint is exported with them
//! ([`super::checkpoint`]), so that a set of exported streams from
//! several replicas can be verified without their HMAC keys
//! (`glovebox audit --verify --exported FILE… --checkpoint-key PUB`).
//!
//! ```text
//! {"replica":"web-0","stream":"9f…","seq":7,"event":"TOOL_EXECUTED","line":"[…] TOOL_EXECUTED … mac=…"}
//! {"replica":"web-0","stream":"9f…","seq":7,"checkpoint":{"lines":7,"chain":"…","final":false,"at":"…"},"key_id":"…","sig":"…"}
//! ```
//!
//! With `--audit-otlp URL` every line also goes out as an OpenTelemetry
//! log record ([`super::otlp`]).
//!
//! Each record is verified whole (`event`, `seq`, every field, their
//! order and the text as written: [`checkpoint::line_record`]): a
//! collector must keep the lines as they are, not re-serialise them.
//!
//! `stream` is new at each start, so a restarted replica's lines never
//! read as a repeat of its earlier ones. Lines are exported while the
//! writers' lock on the log is held, in the order they are in the log.

use std::io::Write;
use std::sync::{Mutex, OnceLock, PoisonError};

use ed25519_dalek::SigningKey;

use super::checkpoint::{self, Chain};

/// Where exported lines go.
pub enum Sink {
    /// Nowhere (only OTLP, [`Exporter::with_otlp`]).
    None,
    /// The process's stdout.
    Stdout,
    /// Anything else (tests).
    Writer(Box<dyn Write + Send>),
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Sink::None => "Sink::None",
            Sink::Stdout => "Sink::Stdout",
            Sink::Writer(_) => "Sink::Writer",
        })
    }
}

/// Exports one process's audit lines.
#[derive(Debug)]
pub struct Exporter {
    replica: String,
    stream: String,
    every: u64,
    key: Option<SigningKey>,
    otlp: Option<super::otlp::Otlp>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    sink: Sink,
    chain: Chain,
    since_checkpoint: u64,
    finished: bool,
}

static EXPORTER: OnceLock<Exporter> = OnceLock::new();

impl Exporter {
    /// An exporter of `replica`'s lines to `sink`, a checkpoint signed
    /// with `key` every `every` lines (at least 1) and at [`Exporter::finish`].
    pub fn new(replica: &str, sink: Sink, key: Option<SigningKey>, every: u64) -> Exporter {
        let mut id = [0u8; 8];
        let _ = getrandom::fill(&mut id);
        let stream = hex::encode(id);
        Exporter {
            replica: replica.to_string(),
            every: every.max(1),
            key,
            otlp: None,
            state: Mutex::new(State {
                sink,
                chain: Chain::start(replica, &stream),
                since_checkpoint: 0,
                finished: false,
            }),
            stream,
        }
    }

    /// Also exports every line as an OpenTelemetry log record.
    pub fn with_otlp(mut self, otlp: super::otlp::Otlp) -> Exporter {
        self.otlp = Some(otlp);
        self
    }

    /// Exports `text`, complete lines as the log got them.
    pub fn lines(&self, text: &str) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.finished {
            return;
        }
        let mut out = String::new();
        for line in text.lines() {
            if let Some(o) = &self.otlp {
                o.line(line);
            }
            st.chain.push(line);
            out.push_str(&checkpoint::line_record(
                &self.replica,
                &self.stream,
                st.chain.lines,
                line,
            ));
            out.push('\n');
            st.since_checkpoint += 1;
            if st.since_checkpoint >= self.every {
                if let Some(c) = self.checkpoint(&st.chain, false) {
                    out.push_str(&c);
                }
                st.since_checkpoint = 0;
            }
        }
        emit(&mut st.sink, &out);
    }

    /// The final checkpoint (at shutdown); nothing is exported after it.
    pub fn finish(&self) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.finished {
            return;
        }
        st.finished = true;
        if let Some(c) = self.checkpoint(&st.chain, true) {
            emit(&mut st.sink, &c);
        }
        if let Some(o) = &self.otlp {
            o.shutdown();
        }
    }

    fn checkpoint(&self, chain: &Chain, last: bool) -> Option<String> {
        let key = self.key.as_ref()?;
        let mut line =
            checkpoint::signed(key, &self.replica, &self.stream, chain, last).to_string();
        line.push('\n');
        Some(line)
    }
}

fn emit(sink: &mut Sink, text: &str) {
    if text.is_empty() {
        return;
    }
    let written = match sink {
        Sink::None => Ok(()),
        Sink::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes()).and_then(|()| out.flush())
        }
        Sink::Writer(w) => w.write_all(text.as_bytes()).and_then(|()| w.flush()),
    };
    if let Err(e) = written {
        eprintln!("glovebox: cannot export audit lines: {e}");
    }
}

/// Exports this process's audit lines through `exporter` from now on;
/// only the first call counts.
pub fn install(exporter: Exporter) {
    let _ = EXPORTER.set(exporter);
}

/// Called by the log with the lines it just wrote.
pub(crate) fn written(text: &str) {
    if let Some(e) = EXPORTER.get() {
        e.lines(text);
    }
}

/// Writes the final checkpoint (at shutdown, after the audit tail is synced).
pub fn finish() {
    if let Some(e) = EXPORTER.get() {
        e.finish();
    }
}
