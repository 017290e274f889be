//! Errors that point at a place in a file: every config and zone error names
//! the file and line so an operator can fix it without guessing.

use std::fmt;
use std::path::{Path, PathBuf};

/// An error at `file:line`. Line 0 means "the file as a whole".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocatedError {
    /// The file at fault (config or zone file), as it was opened.
    pub file: PathBuf,
    /// 1-based line number; 0 for the file as a whole.
    pub line: usize,
    /// What is wrong, for the operator.
    pub message: String,
}

impl LocatedError {
    /// An error at `file:line` (line 0: the whole file).
    pub fn new(file: impl AsRef<Path>, line: usize, message: impl Into<String>) -> Self {
        LocatedError {
            file: file.as_ref().to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for LocatedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
        }
    }
}

impl std::error::Error for LocatedError {}

/// Byte offset in `text` to a 1-based line number.
pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
