//! `kind: command`: a program run in the jail with templated argv, no
//! shell in between.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::manifest::discover::resolve;
use crate::manifest::model::CommandExec;
use crate::template::{self, Bindings, TemplateError};

/// The program to execute: a path (relative to the root, or absolute) when
/// the entrypoint has a `/`, else a name the jail looks up in its PATH.
pub fn program(root: &Path, exec: &CommandExec) -> PathBuf {
    if exec.entrypoint.contains('/') {
        resolve(root, &exec.entrypoint)
    } else {
        PathBuf::from(&exec.entrypoint)
    }
}

/// The full argv: the program, then each argument template expanded (an
/// argument whose placeholder is unset is dropped).
pub fn argv(
    root: &Path,
    exec: &CommandExec,
    b: &Bindings<'_>,
) -> Result<Vec<OsString>, TemplateError> {
    let mut argv = vec![program(root, exec).into_os_string()];
    for t in &exec.args {
        if let Some(arg) = template::argv(t, b)? {
            argv.push(arg.into());
        }
    }
    Ok(argv)
}
