//! Memory and process limits for a whole call, with cgroups.
//!
//! Each call gets its own cgroup per controller, created under the
//! supervisor's own cgroup: cgroup v2 where the `memory` / `pids`
//! controllers are delegated to us, else the v1 hierarchy of that
//! controller. The child moves itself in (writes `0` to a file opened before
//! clone) before it can fork, so nothing escapes the limit. Without a usable
//! cgroup the caller falls back to rlimits (see `spawn`).
//!
//! ## Joining cheaply
//!
//! Writing a process to `cgroup.procs` takes the kernel's global
//! `cgroup_threadgroup_rwsem` for writing, which (unless the hierarchy is
//! mounted with `favordynmods`) waits for an RCU grace period: 5-15 ms per
//! call, serialised across every concurrent call. Moving a single *thread*
//! that moves itself (writing `0` to a v1 hierarchy's `tasks`) does not
//! take that lock. The child is single-threaded at that point (a fresh
//! `clone` without `CLONE_THREAD`, before `execve`), so moving its one
//! thread moves the whole process, and every process it later forks starts
//! in the group. On v1 hierarchies we therefore write to `tasks`; on v2
//! (where `cgroup.threads` cannot cross domain cgroups) to `cgroup.procs`.
//!
//! ## Reuse in servers
//!
//! Making and removing a cgroup per call costs the kernel a directory of
//! control files each time (and a removal can wait for the last task to be
//! released). A server ([`reuse`]: `serve`, `mcp`) keeps the groups of
//! ended calls instead, up to [`IDLE_MAX`], and hands one to the next call
//! that needs the same controllers: only when it holds no process any more
//! (its `cgroup.procs` is empty), with that call's limits written again and
//! its counters (memory kills, refused forks) read first, so that what the
//! call reports is its own. So each call still has a group of its own for
//! its whole life, with its own limits, and never one another call is
//! still in. Idle groups are removed at shutdown ([`release_idle`]), and by
//! the next process's sweep when the server was killed.

use std::fs;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Errors while setting up a call's cgroup.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// A cgroup file could not be created or written.
    #[error("failed to set up cgroup {path:?}")]
    Setup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Which cgroup version a controller is used through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Legacy per-controller hierarchy.
    V1,
    /// Unified hierarchy.
    V2,
}

impl Version {
    /// "cgroup-v1" or "cgroup-v2".
    pub fn label(self) -> &'static str {
        self.memory().as_str()
    }

    /// The memory limit through this version, as a result reports it.
    pub fn memory(self) -> super::spec::MemoryLimitBy {
        match self {
            Version::V1 => super::spec::MemoryLimitBy::CgroupV1,
            Version::V2 => super::spec::MemoryLimitBy::CgroupV2,
        }
    }

    /// The process limit through this version, as a result reports it.
    pub fn pids(self) -> super::spec::PidsLimitBy {
        match self {
            Version::V1 => super::spec::PidsLimitBy::CgroupV1,
            Version::V2 => super::spec::PidsLimitBy::CgroupV2,
        }
    }
}

/// A controller we may create child cgroups for.
#[derive(Debug, Clone)]
pub struct Controller {
    /// Directory under which per-call cgroups are made.
    pub base: PathBuf,
    /// How it is used.
    pub version: Version,
}

/// The controllers usable on this machine by this process (probed once).
#[derive(Debug, Clone, Default)]
pub struct Available {
    /// Memory controller.
    pub memory: Option<Controller>,
    /// Pids controller.
    pub pids: Option<Controller>,
}

/// True when joining a call's cgroups is cheap here: every controller in
/// use is on a v1 hierarchy (joined by moving the single thread, see the
/// module docs), or the v2 hierarchy is mounted with `favordynmods`. When it
/// is not, each call's move waits for an RCU grace period (several
/// milliseconds): the largest part of a one-shot call's overhead.
pub fn fast_attach() -> bool {
    let avail = available();
    let used: Vec<&Controller> = [&avail.memory, &avail.pids].into_iter().flatten().collect();
    if used.iter().all(|c| c.version == Version::V1) {
        return true;
    }
    mounts()
        .iter()
        .filter(|m| m.v2)
        .all(|m| m.options.split(',').any(|o| o == "favordynmods"))
}

/// Probes (once per process) which controllers we can use.
pub fn available() -> &'static Available {
    static CELL: OnceLock<Available> = OnceLock::new();
    CELL.get_or_init(probe)
}

struct Mount {
    point: PathBuf,
    root: String,
    v2: bool,
    options: String,
}

fn mounts() -> Vec<Mount> {
    let Ok(text) = read_kernel_file(Path::new("/proc/self/mountinfo")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let l: Vec<&str> = left.split(' ').collect();
            let r: Vec<&str> = right.split(' ').collect();
            let fstype = *r.first()?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(Mount {
                point: PathBuf::from(l.get(4)?),
                root: (*l.get(3)?).to_string(),
                v2: fstype == "cgroup2",
                options: (*r.get(2)?).to_string(),
            })
        })
        .collect()
}

/// Our own cgroup path per hierarchy: ("" for v2 | controller list, path).
fn own_paths() -> Vec<(String, String)> {
    let Ok(text) = read_kernel_file(Path::new("/proc/self/cgroup")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let mut it = line.splitn(3, ':');
            let _id = it.next()?;
            let ctrls = it.next()?.to_string();
            let path = it.next()?.to_string();
            Some((ctrls, path))
        })
        .collect()
}

fn join_cgroup(point: &Path, mount_root: &str, own: &str) -> PathBuf {
    let rel = own.strip_prefix(mount_root).unwrap_or(own);
    point.join(rel.trim_start_matches('/'))
}

/// True when we may create child cgroups in `base`.
fn writable(base: &Path) -> bool {
    nix::unistd::access(base, nix::unistd::AccessFlags::W_OK).is_ok()
        && base.join("cgroup.procs").exists()
}

/// True when children of the v2 cgroup `base` get `controller` (it is
/// enabled in `base`'s `cgroup.subtree_control`) and we may create them.
fn v2_delegates(base: &Path, controller: &str) -> bool {
    writable(base)
        && read_kernel_file(&base.join("cgroup.subtree_control"))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == controller))
}

fn probe() -> Available {
    let mounts = mounts();
    let own = own_paths();
    let mut out = Available::default();
    // cgroup v2 first: it is where the controllers live on modern systems.
    if let (Some(m), Some((_, path))) = (
        mounts.iter().find(|m| m.v2),
        own.iter().find(|(c, _)| c.is_empty()),
    ) {
        let base = join_cgroup(&m.point, &m.root, path);
        if v2_delegates(&base, "memory") {
            out.memory = Some(Controller {
                base: base.clone(),
                version: Version::V2,
            });
        }
        if v2_delegates(&base, "pids") {
            out.pids = Some(Controller {
                base,
                version: Version::V2,
            });
        }
    }
    for (name, slot) in [("memory", &mut out.memory), ("pids", &mut out.pids)] {
        if slot.is_some() {
            continue;
        }
        let Some(m) = mounts
            .iter()
            .find(|m| !m.v2 && m.options.split(',').any(|o| o == name))
        else {
            continue;
        };
        let Some((_, path)) = own.iter().find(|(c, _)| c.split(',').any(|c| c == name)) else {
            continue;
        };
        let base = join_cgroup(&m.point, &m.root, path);
        if writable(&base) {
            *slot = Some(Controller {
                base,
                version: Version::V1,
            });
        }
    }
    out
}

/// Removes call cgroups left by supervisors that died without cleaning up
/// (killed with SIGKILL): their owner pid is gone, and with it every
/// process of the call (each call ends with its PID namespace).
fn sweep_stale(avail: &Available) {
    for c in [&avail.memory, &avail.pids].into_iter().flatten() {
        let Ok(entries) = fs::read_dir(&c.base) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("glovebox-")) else {
                continue;
            };
            let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() {
                // Fails harmlessly if processes are still inside.
                let _ = fs::remove_dir(e.path());
            }
        }
    }
}

/// Most idle call groups a server keeps for reuse.
pub const IDLE_MAX: usize = 64;

static REUSE: AtomicBool = AtomicBool::new(false);

fn idle() -> &'static Mutex<Vec<CallGroup>> {
    static IDLE: OnceLock<Mutex<Vec<CallGroup>>> = OnceLock::new();
    IDLE.get_or_init(Default::default)
}

/// Keeps the groups of ended calls for the next calls of this process (a
/// server: see [the module docs](self)) instead of removing them.
pub fn reuse() {
    REUSE.store(true, Ordering::Relaxed);
}

/// Stops reusing and removes every idle group (a server that is about to
/// exit).
pub fn release_idle() {
    REUSE.store(false, Ordering::Relaxed);
    let groups = std::mem::take(&mut *idle().lock().unwrap_or_else(PoisonError::into_inner));
    drop(groups);
}

/// The cgroups of one call. Removed when dropped (kept for the next call
/// in a server, see [`reuse`]).
#[derive(Debug)]
pub struct CallGroup {
    dirs: Vec<PathBuf>,
    /// The file of each group the child writes `0` into to join it:
    /// `tasks` on v1 (see [the module docs](self)), `cgroup.procs` on v2.
    pub procs: Vec<OwnedFd>,
    memory: Option<(PathBuf, Version)>,
    pids: Option<(PathBuf, Version)>,
    /// The limits written now.
    memory_limit: Option<u64>,
    pids_limit: Option<u64>,
    /// The counters when this call got the group (a reused group's count
    /// from earlier calls).
    oom_kills_before: u64,
    pids_refused_before: u64,
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    fs::write(path, value).map_err(|source| CgroupError::Setup {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a v1 memory limit (and the memory+swap one when there is one):
/// the swap limit may never be below the memory limit, so the order
/// depends on whether the limit goes up.
fn write_v1_memory(dir: &Path, limit: u64, raising: bool) -> Result<(), CgroupError> {
    let memsw = dir.join("memory.memsw.limit_in_bytes");
    let has_memsw = memsw.exists();
    if raising && has_memsw {
        write(&memsw, &limit.to_string())?;
    }
    write(&dir.join("memory.limit_in_bytes"), &limit.to_string())?;
    if !raising && has_memsw {
        write(&memsw, &limit.to_string())?;
    }
    Ok(())
}

impl CallGroup {
    /// The call's cgroups with these limits (`None`: that controller is
    /// not used): an idle group of this server when one is free and empty
    /// ([`reuse`]), else new ones.
    pub fn create(memory_bytes: Option<u64>, pids: Option<u64>) -> Result<CallGroup, CgroupError> {
        if REUSE.load(Ordering::Relaxed) {
            if let Some(g) = CallGroup::take_idle(memory_bytes, pids) {
                return Ok(g);
            }
        }
        CallGroup::make(memory_bytes, pids)
    }

    /// An idle group with the same controllers that holds no process,
    /// given these limits and its counters read; `None` when there is none.
    fn take_idle(memory_bytes: Option<u64>, pids: Option<u64>) -> Option<CallGroup> {
        let mut g = {
            let mut pool = idle().lock().unwrap_or_else(PoisonError::into_inner);
            let i = pool.iter().position(|g| {
                g.memory.is_some() == memory_bytes.is_some()
                    && g.pids.is_some() == pids.is_some()
                    && g.is_empty()
            })?;
            pool.swap_remove(i)
        };
        match g.reset(memory_bytes, pids) {
            Ok(()) => Some(g),
            Err(_) => {
                // Not kept: removed now, and the call gets new groups.
                g.discard();
                None
            }
        }
    }

    /// True when no process is in any of the groups.
    fn is_empty(&self) -> bool {
        self.dirs
            .iter()
            .all(|d| fs::read(d.join("cgroup.procs")).is_ok_and(|procs| procs.is_empty()))
    }

    /// Sets this call's limits on a reused group and reads its counters.
    fn reset(&mut self, memory_bytes: Option<u64>, pids: Option<u64>) -> Result<(), CgroupError> {
        if let (Some(limit), Some((dir, version))) = (memory_bytes, &self.memory) {
            if self.memory_limit != Some(limit) {
                let raising = self.memory_limit.is_none_or(|old| limit > old);
                self.memory_limit = None;
                match version {
                    Version::V2 => write(&dir.join("memory.max"), &limit.to_string())?,
                    Version::V1 => write_v1_memory(dir, limit, raising)?,
                }
                self.memory_limit = Some(limit);
            }
        }
        if let (Some(limit), Some((dir, _))) = (pids, &self.pids) {
            if self.pids_limit != Some(limit) {
                self.pids_limit = None;
                write(&dir.join("pids.max"), &limit.to_string())?;
                self.pids_limit = Some(limit);
            }
        }
        self.oom_kills_before = self.oom_kills();
        self.pids_refused_before = self.pids_refused();
        Ok(())
    }

    /// Removes the groups now (never kept for reuse).
    fn discard(mut self) {
        self.remove();
    }

    /// Creates new cgroups for a call.
    fn make(memory_bytes: Option<u64>, pids: Option<u64>) -> Result<CallGroup, CgroupError> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        static SWEPT: OnceLock<()> = OnceLock::new();
        let avail = available();
        SWEPT.get_or_init(|| sweep_stale(avail));
        // The pid names the owner (for the sweep); the start time keeps a
        // reused pid from colliding with a group a killed supervisor left.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let name = format!(
            "glovebox-{}-{nanos}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut group = CallGroup {
            dirs: Vec::new(),
            procs: Vec::new(),
            memory: None,
            pids: None,
            memory_limit: None,
            pids_limit: None,
            oom_kills_before: 0,
            pids_refused_before: 0,
        };
        let mut make = |base: &Path| -> Result<PathBuf, CgroupError> {
            let dir = base.join(&name);
            if !group.dirs.contains(&dir) {
                fs::create_dir(&dir).map_err(|source| CgroupError::Setup {
                    path: dir.clone(),
                    source,
                })?;
                group.dirs.push(dir.clone());
            }
            Ok(dir)
        };
        if let (Some(limit), Some(c)) = (memory_bytes, &avail.memory) {
            let dir = make(&c.base)?;
            match c.version {
                Version::V2 => {
                    write(&dir.join("memory.max"), &limit.to_string())?;
                    // No swap: the limit must bind.
                    let swap = dir.join("memory.swap.max");
                    if swap.exists() {
                        write(&swap, "0")?;
                    }
                }
                Version::V1 => write_v1_memory(&dir, limit, false)?,
            }
            group.memory = Some((dir, c.version));
            group.memory_limit = Some(limit);
        }
        if let (Some(limit), Some(c)) = (pids, &avail.pids) {
            let dir = make(&c.base)?;
            write(&dir.join("pids.max"), &limit.to_string())?;
            group.pids = Some((dir, c.version));
            group.pids_limit = Some(limit);
        }
        for dir in &group.dirs {
            let v1 = [&group.memory, &group.pids]
                .into_iter()
                .flatten()
                .any(|(d, v)| d == dir && *v == Version::V1);
            let path = dir.join(if v1 { "tasks" } else { "cgroup.procs" });
            let file = fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|source| CgroupError::Setup { path, source })?;
            group.procs.push(file.into());
        }
        Ok(group)
    }

    /// The tool's memory limit, to charge what the supervisor holds for
    /// the call (`ChargedLimit`); `None` where this group limits no
    /// memory. A group charged once writes its limit again when reused.
    pub fn tool_memory(&mut self) -> Option<std::sync::Arc<dyn super::ToolMemory>> {
        let (dir, version) = self.memory.clone()?;
        let limit = self.memory_limit.take()?;
        Some(std::sync::Arc::new(ChargedLimit {
            dir,
            version,
            limit,
            charged: Mutex::new(0),
        }))
    }

    /// How memory is limited by this group, if it is.
    pub fn memory_version(&self) -> Option<Version> {
        self.memory.as_ref().map(|(_, v)| *v)
    }

    /// How processes are limited by this group, if they are.
    pub fn pids_version(&self) -> Option<Version> {
        self.pids.as_ref().map(|(_, v)| *v)
    }

    /// True when the kernel killed a process for memory in this group
    /// during this call.
    pub fn memory_exceeded(&self) -> bool {
        self.oom_kills() > self.oom_kills_before
    }

    /// True when the process limit refused a fork in this group during
    /// this call.
    pub fn pids_exceeded(&self) -> bool {
        self.pids_refused() > self.pids_refused_before
    }

    fn oom_kills(&self) -> u64 {
        let Some((dir, version)) = &self.memory else {
            return 0;
        };
        let (file, key) = match version {
            Version::V2 => ("memory.events", "oom_kill"),
            Version::V1 => ("memory.oom_control", "oom_kill"),
        };
        counter(&dir.join(file), key)
    }

    fn pids_refused(&self) -> u64 {
        self.pids
            .as_ref()
            .map_or(0, |(dir, _)| counter(&dir.join("pids.events"), "max"))
    }

    /// Removes the groups (waiting briefly for the kernel to release the
    /// last task of a call that just ended).
    fn remove(&mut self) {
        self.procs.clear();
        for dir in std::mem::take(&mut self.dirs) {
            // The tree is dead by now (its PID namespace ended); the kernel
            // may need a moment to release the last task.
            for attempt in 0..50 {
                match fs::remove_dir(&dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) => {
                        if attempt == 10 {
                            let _ = fs::write(dir.join("cgroup.kill"), "1");
                        }
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                }
            }
        }
    }
}

/// A call's memory limit charged with what the supervisor holds for the
/// call: the group's own limit is lowered by what is charged (so the
/// kernel holds the tool to what is left), and a charge is refused when
/// the tool already uses more than would be left.
#[derive(Debug)]
struct ChargedLimit {
    dir: PathBuf,
    version: Version,
    /// The call's limit.
    limit: u64,
    /// Bytes charged now.
    charged: Mutex<u64>,
}

impl ChargedLimit {
    /// What the tool's processes use now.
    fn used(&self) -> Option<u64> {
        let file = match self.version {
            Version::V2 => "memory.current",
            Version::V1 => "memory.usage_in_bytes",
        };
        read_kernel_file(&self.dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Sets the group's limit to `limit - charged`.
    fn write(&self, charged: u64, raising: bool) -> Result<(), CgroupError> {
        let left = self.limit.saturating_sub(charged).to_string();
        match self.version {
            Version::V2 => write(&self.dir.join("memory.max"), &left),
            Version::V1 => write_v1_memory(&self.dir, self.limit.saturating_sub(charged), raising),
        }
    }
}

impl super::ToolMemory for ChargedLimit {
    fn take(&self, bytes: u64) -> Result<(), u64> {
        let mut charged = self.charged.lock().unwrap_or_else(PoisonError::into_inner);
        let next = charged.saturating_add(bytes);
        // Unreadable usage is no room: refused.
        let used = self.used().ok_or(self.limit)?;
        if used.saturating_add(next) > self.limit {
            return Err(self.limit);
        }
        self.write(next, false).map_err(|_| self.limit)?;
        *charged = next;
        Ok(())
    }

    fn give(&self, bytes: u64) {
        let mut charged = self.charged.lock().unwrap_or_else(PoisonError::into_inner);
        let next = charged.saturating_sub(bytes);
        // A failed write leaves the limit lower (never higher) than the
        // manifest's; the group writes it again when reused.
        let _ = self.write(next, true);
        *charged = next;
    }
}

/// A file of the kernel's (procfs, cgroupfs) read whole. Such files say
/// their size is 0, so `fs::read_to_string` starts with a 32-byte read and
/// doubles it, and a `seq_file` (`mountinfo`) is walked again from its
/// start for every read: seven reads for this machine's `mountinfo`, more
/// the more mounts a host has. One 8 KiB read (and the one that finds the
/// end) instead.
fn read_kernel_file(path: &Path) -> std::io::Result<String> {
    let mut buf = Vec::with_capacity(16 * 1024);
    fs::File::open(path)?.read_to_end(&mut buf)?;
    String::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

fn counter(path: &Path, key: &str) -> u64 {
    read_kernel_file(path)
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse().ok()).flatten()
            })
        })
        .unwrap_or(0)
}

impl Drop for CallGroup {
    fn drop(&mut self) {
        if self.dirs.is_empty() {
            return;
        }
        if REUSE.load(Ordering::Relaxed) {
            let mut pool = idle().lock().unwrap_or_else(PoisonError::into_inner);
            if pool.len() < IDLE_MAX {
                // Kept whole for the next call (whose `take_idle` checks it
                // is empty by then).
                let kept = CallGroup {
                    dirs: std::mem::take(&mut self.dirs),
                    procs: std::mem::take(&mut self.procs),
                    memory: self.memory.take(),
                    pids: self.pids.take(),
                    memory_limit: self.memory_limit,
                    pids_limit: self.pids_limit,
                    oom_kills_before: 0,
                    pids_refused_before: 0,
                };
                pool.push(kept);
                return;
            }
        }
        self.remove();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Runs `script` with its shell moved into `group`'s pids cgroup first.
    fn run_in(group: &CallGroup, script: &str) {
        let (dir, _) = group.pids.as_ref().unwrap();
        let tasks = dir.join("tasks");
        let target = if tasks.exists() {
            tasks
        } else {
            dir.join("cgroup.procs")
        };
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > '{}' || exit 1; {script}",
                target.display()
            ))
            .status()
            .unwrap();
        assert!(status.code().is_some(), "{status:?}");
    }

    #[test]
    fn a_reused_group_is_empty_has_the_new_limits_and_counts_only_its_own_call() {
        if available().pids.is_none() {
            let why = "no writable pids cgroup for this user";
            if std::env::var("GLOVEBOX_REQUIRE_KERNEL").as_deref() == Ok("1")
                && nix::unistd::geteuid().is_root()
            {
                panic!("GLOVEBOX_REQUIRE_KERNEL=1 and {why}");
            }
            eprintln!("SKIPPED: {why}");
            return;
        }
        reuse();
        // A call that hit its process limit.
        let first = CallGroup::create(None, Some(3)).unwrap();
        run_in(
            &first,
            "for i in 1 2 3 4 5 6; do sleep 0.2 & done 2>/dev/null; wait",
        );
        assert!(first.pids_exceeded(), "the probe hit the limit");
        let dir = first.dirs.clone();
        // The shell gives up when a fork fails: its sleeps end on their
        // own (a call's tree is dead when its group is given back).
        for _ in 0..300 {
            if first.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(first.is_empty());
        drop(first);
        // The next call gets that group, with its own limit and counters.
        let second = CallGroup::create(None, Some(100)).unwrap();
        assert_eq!(second.dirs, dir, "the idle group was reused");
        let (pids_dir, _) = second.pids.as_ref().unwrap();
        assert_eq!(
            fs::read_to_string(pids_dir.join("pids.max"))
                .unwrap()
                .trim(),
            "100"
        );
        assert!(
            !second.pids_exceeded(),
            "the first call's refusals are not this one's"
        );
        // A group still holding a process is never handed out.
        run_in(&second, "sleep 5 >/dev/null 2>&1 & echo started");
        assert!(!second.is_empty(), "the sleeper is in the group");
        drop(second);
        let third = CallGroup::create(None, Some(100)).unwrap();
        assert_ne!(
            third.dirs, dir,
            "a group with a process in it was not reused"
        );
        // End the sleeper, then every group goes away with the pool.
        let procs = fs::read_to_string(dir[0].join("cgroup.procs")).unwrap();
        for pid in procs.split_whitespace() {
            let _ = Command::new("kill").args(["-9", pid]).status();
        }
        let third_dirs = third.dirs.clone();
        drop(third);
        release_idle();
        for d in dir.iter().chain(&third_dirs) {
            for _ in 0..100 {
                if !d.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            if d.exists() {
                // The sleeper's exit may lag: remove it the way the sweep would.
                let _ = fs::remove_dir(d);
            }
            assert!(!d.exists(), "{d:?} removed");
        }
    }
}
