//! What the supervisor asks of the in-jail helper ([`Request`], on its
//! stdin) and what it answers ([`Reply`], one JSON object on its stdout).
//!
//! Paths in a request are relative to the jail's working directory, the
//! project root; `root` and `write_dir` are absolute and name the only
//! places the helper keeps access to once it has restricted itself.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One operation for the helper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Read a text file of at most `max_bytes` bytes.
    Read {
        /// The project root (read-only access).
        root: PathBuf,
        /// The file, relative to the root.
        path: String,
        /// Largest file returned.
        max_bytes: u64,
    },
    /// List a directory, optionally recursively.
    List {
        /// The project root (read-only access).
        root: PathBuf,
        /// The directory, relative to the root.
        directory: String,
        /// Descend into subdirectories (never through symbolic links).
        recursive: bool,
        /// Entries listed at most; the listing says when it stopped.
        max_entries: usize,
    },
    /// Replace or create `dir/name` atomically with `content`.
    Write {
        /// The project root (read-only access).
        root: PathBuf,
        /// The directory the helper may write in (absolute, checked by the
        /// supervisor).
        write_dir: PathBuf,
        /// The target's directory, relative to the root (`.` for the root).
        dir: String,
        /// The target's file name (one path component).
        name: String,
        /// The new content.
        content: String,
    },
}

/// The helper's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// The file's content.
    Content {
        /// UTF-8 text.
        text: String,
    },
    /// The directory listing, formatted.
    Listing {
        /// One entry per line.
        text: String,
    },
    /// The file was written.
    Written,
    /// Nothing exists at the path.
    Missing,
    /// A directory where a file was expected, or the reverse.
    WrongType,
    /// The jail refused the access (outside the root, or not permitted).
    Denied {
        /// What was refused.
        detail: String,
    },
    /// The file is larger than the request allows.
    TooLarge {
        /// Its size in bytes.
        size: u64,
    },
    /// Any other failure.
    Failed {
        /// What went wrong.
        detail: String,
    },
}
