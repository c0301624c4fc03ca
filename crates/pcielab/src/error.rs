//! The library's error type. It separates the two failures a user must tell apart, because the
//! command line maps them to different exit codes: bad input (a spec, a flag, an event name: exit
//! 2) and runtime failure (I/O, a kernel refusing a write, a guest that hangs: exit 1). Every
//! message names the thing at fault and, where it can, what would be valid.

use std::fmt;

/// What went wrong, with a message meant for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The user asked for something invalid: exit code 2.
    BadInput(String),
    /// Something failed while doing valid work: exit code 1.
    Runtime(String),
}

/// The result of every fallible library call: [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Bad input (exit status 2): the message names the file, field or value and what is valid.
    pub fn bad_input(msg: impl Into<String>) -> Self {
        Error::BadInput(msg.into())
    }

    /// A runtime failure (exit status 1): the input was fine but the machine or the system refused.
    pub fn runtime(msg: impl Into<String>) -> Self {
        Error::Runtime(msg.into())
    }

    /// An I/O failure on `path`, as a runtime error naming the path.
    pub fn io(path: impl AsRef<std::path::Path>, err: std::io::Error) -> Self {
        Error::Runtime(format!("{}: {}", path.as_ref().display(), err))
    }

    /// The process exit code the command line uses for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::BadInput(_) => 2,
            Error::Runtime(_) => 1,
        }
    }

    /// The message alone, without the `pcielab: error:` prefix the CLI prints.
    pub fn message(&self) -> &str {
        match self {
            Error::BadInput(m) | Error::Runtime(m) => m,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Error {}
