//! File identity for incremental reloads: a file whose size, modification
//! time and inode are as they were is taken as unchanged, so a reload keeps
//! what was built from it instead of reading it again.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a file looked like when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    /// The path as it was opened.
    pub path: PathBuf,
    len: u64,
    mtime_ns: i128,
    dev: u64,
    ino: u64,
}

impl FileStamp {
    /// Stamp `path` now; None if it cannot be read. Taken before a file
    /// is read, so a change during the read shows on the next look.
    pub fn of(path: &Path) -> Option<FileStamp> {
        let m = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            path: path.to_path_buf(),
            len: m.len(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            dev: m.dev(),
            ino: m.ino(),
        })
    }

    /// The file still looks as it did.
    pub fn unchanged(&self) -> bool {
        FileStamp::of(&self.path).as_ref() == Some(self)
    }
}
