//! The jail: a child process the kernel confines.
