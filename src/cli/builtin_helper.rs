//! `glovebox __builtin` (hidden): the built-in tools' helper. The
//! supervisor starts it inside the jail; it is not meant to be run by hand.

use std::process::ExitCode;

pub fn run() -> ExitCode {
    glovebox::builtin::helper::main()
}
