//! Streaming master-file parser (RFC 1035 §5) that reports `file:line` for
//! every error and hands each record to a sink as soon as it is read.
//!
//! A file is read through a 1 MiB window (`WINDOW`), each read checked
//! as UTF-8 once; entries (a directive or a record, possibly spanning lines
//! through `( ... )` or a quoted string) are cut from the window one at a
//! time, their fields borrowed from the text. An entry the window cuts off
//! is left, from the start of its line, for the next read, which appends to
//! it: the tokenizer only ever sees whole entries, and text in memory
//! ([`parse_zone_str`]) goes through it as one window. The window grows only
//! for an entry longer than half of it (a TXT record of many strings in
//! parentheses, say). Names go straight into lower-cased wire form and RDATA
//! into the packed form of [`RdataBuf`], so memory does not grow with the
//! zone or its files (a 1M-name zone file is 52 MB; the window is 1 MiB per
//! file being read) and common records cost no allocation.
//!
//! Handled here: the directives (`$ORIGIN`, `$TTL` with units as in RFC 2308
//! §4, `$INCLUDE`), owner names, the TTL/class/type fields, the RFC 3597 §5
//! generic RDATA form (`\# <length> <hex>`), and the RDATA of A, AAAA, NS,
//! CNAME, PTR, MX, SRV, SOA and TXT. hickory's text path lowercases names,
//! passes them through IDNA (so `foo_bar` or RFC 2317 `0/25` labels fail),
//! reads `\DDD` as octal and rejects `@` in RDATA; it is only used, one
//! record at a time, for the rare types we don't parse ourselves (CAA,
//! HINFO, SSHFP, TLSA, SVCB, ...), whose bytes are hickory's canonical form.
//!
//! Scope of `$INCLUDE`: the included file starts with the includer's origin
//! (or the origin given on the `$INCLUDE` line), `$TTL`, previous owner and
//! previous TTL. Nothing it changes leaks back: after the include the
//! including file carries on with its own state (RFC 1035 §5.1 requires this
//! for the origin; we do the same for the rest so each file reads on its own).
//!
//! Zone semantics (SOA at the apex, CNAME conflicts, out-of-zone data) are
//! checked by the zone builder, using the `file`/`line` of each record.
//! DNAME (RFC 6672) is refused in any form, the generic one included:
//! meridian does not synthesize CNAMEs from it.

use std::fs::{self, File};
use std::io::{ErrorKind, Read};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use hickory_proto::rr::{Name, RData, RecordType};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
use hickory_proto::serialize::txt::{parse_ttl, Parser};
use meridian_wire::rdata::RdataBuf;
use meridian_wire::TYPE_DNAME;

use super::stamp::FileStamp;
use crate::error::LocatedError;

/// One record as read, lent to the sink for the duration of the call.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// Absolute owner name, lower-cased wire form (length-prefixed labels, ending with 0).
    pub owner: &'a [u8],
    /// Numeric type (TYPE65280 -> 65280).
    pub rtype: u16,
    /// TTL in seconds: as written, else `$TTL`, else the previous record's
    /// (an SOA without any of these takes its MINIMUM).
    pub ttl: u32,
    /// The RDATA, packed: [`RdataBuf`] form.
    pub rdata: &'a [u8],
    /// The file the record came from (the `$INCLUDE`d file for included records).
    pub file: &'a Path,
    /// 1-based line where the record starts.
    pub line: usize,
}

/// Where records go: called once per record, in file order. An error stops
/// the parse and is returned as is.
pub type Sink<'s> = dyn FnMut(Record<'_>) -> Result<(), LocatedError> + 's;

/// How many `$INCLUDE`s may be nested below the top-level file.
const MAX_INCLUDE_DEPTH: usize = 8;

/// Octets of a file read at a time: big enough that reads and the tail
/// carried over between them cost next to nothing, small enough to stay
/// out of the memory budget of a reload (which holds two zones).
const WINDOW: usize = 1 << 20;

/// RFC 2181 §8: TTLs are 31-bit.
const MAX_TTL: u32 = 0x7fff_ffff;

/// RFC 1035 §2.3.4: wire names, the root label included.
const MAX_NAME: usize = 255;

const TYPE_A: u16 = 1;
const TYPE_NS: u16 = 2;
const TYPE_CNAME: u16 = 5;
const TYPE_SOA: u16 = 6;
const TYPE_PTR: u16 = 12;
const TYPE_MX: u16 = 15;
const TYPE_TXT: u16 = 16;
const TYPE_AAAA: u16 = 28;
const TYPE_SRV: u16 = 33;
const TYPE_DS: u16 = 43;

/// Parse `path` with initial origin `origin` (lower-cased wire name,
/// absolute). Follows `$INCLUDE` relative to the including file's
/// directory. Returns a stamp of every file read (taken before reading
/// it), for reloads.
pub fn parse_zone_file(
    path: &Path,
    origin: &[u8],
    sink: &mut Sink<'_>,
) -> Result<Vec<FileStamp>, LocatedError> {
    parse_zone_file_windowed(path, origin, sink, WINDOW)
}

/// [`parse_zone_file`] reading `window` octets at a time (tests use tiny ones).
fn parse_zone_file_windowed(
    path: &Path,
    origin: &[u8],
    sink: &mut Sink<'_>,
    window: usize,
) -> Result<Vec<FileStamp>, LocatedError> {
    let mut loader = Loader::new(sink, path, window);
    loader.stamps.extend(FileStamp::of(path));
    loader.parse_file(path, Scope::new(origin))?;
    Ok(loader.stamps)
}

/// Same, from text already in memory (`path` is used for messages and
/// relative `$INCLUDE`).
pub fn parse_zone_str(
    text: &str,
    path: &Path,
    origin: &[u8],
    sink: &mut Sink<'_>,
) -> Result<(), LocatedError> {
    let mut scope = Scope::new(origin);
    Loader::new(sink, path, WINDOW).parse_window(text, true, 1, path, &mut scope)?;
    Ok(())
}

/// An error reading `path`: the file as a whole (line 0).
fn cannot_read(path: &Path, e: std::io::Error) -> LocatedError {
    LocatedError::new(path, 0, format!("cannot read file: {e}"))
}

/// How much of `bytes` to check as UTF-8 now: all but a last character whose
/// first octets are there and the rest not yet read.
fn whole_chars(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(3) {
        let b = bytes[len - back];
        // The last octet that is not a continuation octet starts a character.
        if b & 0xC0 != 0x80 {
            return if utf8_len(b) > back { len - back } else { len };
        }
    }
    // No start in the last three octets: complete, or invalid anyway.
    len
}

/// Best-effort identity of a file for include-loop detection.
fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

// ---------------------------------------------------------------------------
// Tokenizer
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Field<'t> {
    /// An unquoted field, exactly as written (backslash escapes kept, since
    /// their meaning depends on whether the field is a name or a string).
    Word(&'t str),
    /// The text between the quotes of a `"..."` field, escapes kept (and
    /// already checked, so decoding it cannot fail).
    Quoted(&'t str),
}

/// One logical entry: a directive or a record.
#[derive(Debug, Default)]
struct Entry<'t> {
    /// Line of the first field.
    line: usize,
    /// The line started with whitespace: the record reuses the previous owner.
    blank_owner: bool,
    fields: Vec<Field<'t>>,
}

impl<'t> Entry<'t> {
    fn push(&mut self, line: usize, field: Field<'t>) {
        if self.fields.is_empty() {
            self.line = line;
        }
        self.fields.push(field);
    }
}

/// Cuts a master file into entries, one per call. Errors carry the line
/// they occur on.
struct Lexer<'t> {
    text: &'t str,
    pos: usize,
    line: usize,
    at_line_start: bool,
    /// The text runs to the end of the file. If not, an entry that runs into
    /// the end of the text may go on in the next read: it is neither
    /// returned nor reported but left, from the start of its line, for the
    /// next window. Everything before that point is read exactly as it
    /// would be in the whole file, since no decision looks further ahead.
    last: bool,
}

/// ASCII whitespace as `char::is_whitespace` sees it (tab to CR, space).
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | b' ')
}

/// Length of the UTF-8 sequence that starts with `lead` (the text is valid).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

impl<'t> Lexer<'t> {
    /// A lexer over `text`, which starts a line numbered `line`.
    fn new(text: &'t str, line: usize, last: bool) -> Self {
        Lexer {
            text,
            pos: 0,
            line,
            at_line_start: true,
            last,
        }
    }

    /// Non-ASCII whitespace (`char::is_whitespace`, as the tokenizer has
    /// always used) starting at `i`: its length.
    fn unicode_space_at(&self, i: usize) -> Option<usize> {
        let c = self.text[i..].chars().next()?;
        c.is_whitespace().then(|| c.len_utf8())
    }

    /// Fill `entry` with the next entry; false at the end of the text (when
    /// not `last`, `pos` and `line` are then where the rest starts: the
    /// start of a line, with no entry before it left unread). Calls start
    /// at the start of a line.
    fn next_entry(&mut self, entry: &mut Entry<'t>) -> Result<bool, (usize, String)> {
        entry.fields.clear();
        entry.blank_owner = false;
        let bytes = self.text.as_bytes();
        // Where to resume if the text ends inside the entry: past the blank
        // and comment lines before it, so they are not carried over.
        let mut resume = (self.pos, self.line);
        // Line of the open '(' while inside a group; newlines don't end entries then.
        let mut open_paren: Option<usize> = None;
        while let Some(&b) = bytes.get(self.pos) {
            let line_start = std::mem::replace(&mut self.at_line_start, false);
            match b {
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    self.at_line_start = true;
                    if open_paren.is_none() {
                        if !entry.fields.is_empty() {
                            return Ok(true);
                        }
                        entry.blank_owner = false;
                        resume = (self.pos, self.line);
                    }
                }
                b' ' | b'\t' if line_start && open_paren.is_none() => {
                    self.pos += 1;
                    entry.blank_owner = true;
                }
                b';' => {
                    self.pos = match bytes[self.pos..].iter().position(|&b| b == b'\n') {
                        Some(n) => self.pos + n,
                        None => bytes.len(),
                    }
                }
                b'(' => {
                    if open_paren.is_some() {
                        return Err((self.line, "nested '('".into()));
                    }
                    open_paren = Some(self.line);
                    self.pos += 1;
                }
                b')' => {
                    if open_paren.take().is_none() {
                        return Err((self.line, "')' without a matching '('".into()));
                    }
                    self.pos += 1;
                }
                b'"' => self.quoted(entry)?,
                b if is_ascii_space(b) => self.pos += 1,
                0x80.. => match self.unicode_space_at(self.pos) {
                    Some(n) => self.pos += n,
                    None => self.word(entry)?,
                },
                _ => self.word(entry)?,
            }
        }
        if !self.last {
            (self.pos, self.line) = resume;
            self.at_line_start = true;
            return Ok(false);
        }
        if let Some(open) = open_paren {
            return Err((open, "'(' is never closed".into()));
        }
        Ok(!entry.fields.is_empty())
    }

    /// A `"..."` field starting at `self.pos`.
    fn quoted(&mut self, entry: &mut Entry<'t>) -> Result<(), (usize, String)> {
        let bytes = self.text.as_bytes();
        let start = self.line;
        let begin = self.pos + 1;
        let mut i = begin;
        loop {
            match bytes.get(i) {
                // The closing quote may be in the next read.
                None if !self.last => {
                    self.pos = bytes.len();
                    return Ok(());
                }
                None => return Err((start, "unterminated quoted string".into())),
                Some(b'"') => break,
                // Skip the escaped octet so `\"` doesn't end the string.
                Some(b'\\') => {
                    if bytes.get(i + 1) == Some(&b'\n') {
                        self.line += 1;
                    }
                    i += 2;
                }
                Some(b'\n') => {
                    self.line += 1;
                    i += 1;
                }
                Some(_) => i += 1,
            }
        }
        let raw = &self.text[begin..i];
        self.pos = i + 1;
        check_escapes(raw).map_err(|m| (start, m))?;
        entry.push(start, Field::Quoted(raw));
        Ok(())
    }

    /// An unquoted field starting at `self.pos`.
    fn word(&mut self, entry: &mut Entry<'t>) -> Result<(), (usize, String)> {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let mut i = start;
        while let Some(&b) = bytes.get(i) {
            match b {
                // An escaped delimiter (`\ `, `\;`, `\(`) stays in the word.
                b'\\' => match bytes.get(i + 1) {
                    Some(&e) if e != b'\n' => i += 1 + utf8_len(e),
                    // The escaped octet is in the next read.
                    None if !self.last => {
                        i = bytes.len();
                        break;
                    }
                    _ => return Err((self.line, "backslash at end of line".into())),
                },
                b';' | b'(' | b')' => break,
                b if is_ascii_space(b) => break,
                0x80.. => match self.unicode_space_at(i) {
                    Some(_) => break,
                    None => i += utf8_len(b),
                },
                _ => i += 1,
            }
        }
        self.pos = i;
        entry.push(self.line, Field::Word(&self.text[start..i]));
        Ok(())
    }
}

/// The octet of the RFC 1035 §5.1 escape after a backslash (`\DDD` is a
/// decimal octet, `\X` is X) and the index just past it; `i` is the index
/// just past the backslash. A multi-octet X yields its first octet; the
/// rest follow as plain octets.
fn escape_at(b: &[u8], i: usize) -> Result<(u8, usize), String> {
    let Some(&first) = b.get(i) else {
        return Err("backslash at end of field".into());
    };
    if !first.is_ascii_digit() {
        return Ok((first, i + 1));
    }
    let mut value = 0u32;
    for k in i..i + 3 {
        match b.get(k) {
            Some(d) if d.is_ascii_digit() => value = value * 10 + u32::from(d - b'0'),
            _ => return Err("\\DDD escape needs three decimal digits".into()),
        }
    }
    let byte = u8::try_from(value).map_err(|_| format!("escape \\{value} is above 255"))?;
    Ok((byte, i + 3))
}

/// Appends `text` with its escapes decoded to `out`.
fn unescape_into(text: &str, out: &mut Vec<u8>) -> Result<(), String> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // Copy the run up to the next backslash in one go.
        let run = b[i..]
            .iter()
            .position(|&c| c == b'\\')
            .unwrap_or(b.len() - i);
        out.extend_from_slice(&b[i..i + run]);
        i += run;
        if i < b.len() {
            let (byte, next) = escape_at(b, i + 1)?;
            out.push(byte);
            i = next;
        }
    }
    Ok(())
}

/// Fails as decoding `text` would.
fn check_escapes(text: &str) -> Result<(), String> {
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(k) = b[i..].iter().position(|&c| c == b'\\') {
        i = escape_at(b, i + k + 1)?.1;
    }
    Ok(())
}

/// The octets of a field, escapes decoded (into `buf` if it has any).
fn field_octets<'x>(field: &Field<'x>, buf: &'x mut Vec<u8>) -> Result<&'x [u8], String> {
    let (Field::Word(raw) | Field::Quoted(raw)) = *field;
    if !raw.as_bytes().contains(&b'\\') {
        return Ok(raw.as_bytes());
    }
    buf.clear();
    unescape_into(raw, buf)?;
    Ok(buf)
}

// ---------------------------------------------------------------------------
// Entries
// ---------------------------------------------------------------------------

/// Parser state that `$INCLUDE` hands down to the included file.
#[derive(Clone)]
struct Scope {
    /// Lower-cased wire name.
    origin: Vec<u8>,
    /// From `$TTL`.
    default_ttl: Option<u32>,
    /// TTL of the previous record, the RFC 1035 fallback.
    last_ttl: Option<u32>,
    /// Owner of the current record and of lines that start with
    /// whitespace; empty before the first record.
    owner: Vec<u8>,
}

impl Scope {
    fn new(origin: &[u8]) -> Self {
        Scope {
            origin: origin.to_ascii_lowercase(),
            default_ttl: None,
            last_ttl: None,
            owner: Vec::with_capacity(MAX_NAME),
        }
    }
}

/// Buffers reused from record to record.
#[derive(Default)]
struct Bufs {
    /// A name inside RDATA.
    name: Vec<u8>,
    /// The record's packed RDATA.
    rdata: RdataBuf,
    /// One bytes piece being assembled (TXT strings, SRV, RFC 3597 data).
    piece: Vec<u8>,
    /// A field with its escapes decoded.
    unescaped: Vec<u8>,
}

struct Loader<'k, 's> {
    sink: &'k mut Sink<'s>,
    /// Files being read, outermost first: include depth and loop detection.
    open_files: Vec<PathBuf>,
    /// Every file read, stamped before reading.
    stamps: Vec<FileStamp>,
    bufs: Bufs,
    /// Octets read at a time from each file ([`WINDOW`] but in tests).
    window: usize,
}

impl<'k, 's> Loader<'k, 's> {
    fn new(sink: &'k mut Sink<'s>, path: &Path, window: usize) -> Self {
        Loader {
            sink,
            open_files: vec![canonical(path)],
            stamps: Vec::new(),
            bufs: Bufs::default(),
            window,
        }
    }

    /// Opens and parses `path`; errors reading it name the file with line
    /// 0, invalid UTF-8 the line of the first invalid octet.
    fn parse_file(&mut self, path: &Path, scope: Scope) -> Result<(), LocatedError> {
        let file = File::open(path).map_err(|e| cannot_read(path, e))?;
        self.parse_reader(file, path, scope)
    }

    /// Parses the text of `file` from `reader`, a window at a time: each
    /// round fills the window, parses the whole entries in it and moves the
    /// entry it cuts off (if any) to the front, to be completed by the next
    /// read. Only the window and that carried entry are held, whatever the
    /// size of the file; each `$INCLUDE`d file gets a window of its own.
    fn parse_reader(
        &mut self,
        mut reader: impl Read,
        file: &Path,
        mut scope: Scope,
    ) -> Result<(), LocatedError> {
        let mut buf = vec![0; self.window.max(1)];
        // Octets of `buf` read and not yet parsed; the line `buf` starts.
        let mut filled = 0;
        let mut line = 1;
        loop {
            let mut eof = false;
            while filled < buf.len() {
                match reader.read(&mut buf[filled..]) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(cannot_read(file, e)),
                }
            }
            // A character cut by the end of the read waits for the next one.
            let end = if eof {
                filled
            } else {
                whole_chars(&buf[..filled])
            };
            let (text, invalid) = match std::str::from_utf8(&buf[..end]) {
                Ok(text) => (text, None),
                // Parse up to the invalid octet first, so that errors come
                // in file order whatever the window.
                Err(e) => {
                    let valid = e.valid_up_to();
                    // Valid by the error's account: the default is never used.
                    let text = std::str::from_utf8(&buf[..valid]).unwrap_or_default();
                    (text, Some(valid))
                }
            };
            let last = eof && invalid.is_none();
            let (done, done_line) = self.parse_window(text, last, line, file, &mut scope)?;
            if let Some(valid) = invalid {
                let newlines = buf[done..valid].iter().filter(|&&b| b == b'\n').count();
                return Err(LocatedError::new(
                    file,
                    done_line + newlines,
                    "file is not valid UTF-8",
                ));
            }
            if last {
                return Ok(());
            }
            buf.copy_within(done..filled, 0);
            filled -= done;
            line = done_line;
            // Room for at least as much new text as is carried over, so an
            // entry longer than the window is re-read a bounded number of
            // times (the window doubles) rather than once per read.
            if filled > buf.len() / 2 {
                buf.resize(buf.len() * 2, 0);
            }
        }
    }

    /// Parses the entries of `text`, which starts a line numbered `line`;
    /// unless `last` (the text ends the file), an entry running into the end
    /// of `text` is left alone. Returns where the text not parsed starts
    /// (`text.len()` when `last`) and its line.
    fn parse_window(
        &mut self,
        text: &str,
        last: bool,
        line: usize,
        file: &Path,
        scope: &mut Scope,
    ) -> Result<(usize, usize), LocatedError> {
        let mut lexer = Lexer::new(text, line, last);
        let mut entry = Entry::default();
        while lexer
            .next_entry(&mut entry)
            .map_err(|(line, msg)| LocatedError::new(file, line, msg))?
        {
            match entry.fields[0] {
                // Directives only count at the start of a line.
                Field::Word(w) if w.starts_with('$') && !entry.blank_owner => {
                    self.directive(&entry, file, scope)?
                }
                _ => {
                    let (rtype, ttl) = record(&entry, scope, &mut self.bufs)
                        .map_err(|msg| LocatedError::new(file, entry.line, msg))?;
                    (self.sink)(Record {
                        owner: &scope.owner,
                        rtype,
                        ttl,
                        rdata: self.bufs.rdata.as_bytes(),
                        file,
                        line: entry.line,
                    })?;
                }
            }
        }
        Ok((lexer.pos, lexer.line))
    }

    fn directive(
        &mut self,
        entry: &Entry<'_>,
        file: &Path,
        scope: &mut Scope,
    ) -> Result<(), LocatedError> {
        let at = |msg: String| LocatedError::new(file, entry.line, msg);
        let Field::Word(directive) = entry.fields[0] else {
            unreachable!("directives are words")
        };
        let args = &entry.fields[1..];
        match directive.to_ascii_uppercase().as_str() {
            "$ORIGIN" => {
                let [Field::Word(name)] = *args else {
                    return Err(at("$ORIGIN needs exactly one domain name".into()));
                };
                let mut origin = Vec::new();
                parse_name(name, &scope.origin, &mut origin)
                    .map_err(|m| at(format!("bad $ORIGIN '{name}': {m}")))?;
                scope.origin = origin;
            }
            "$TTL" => {
                let [Field::Word(ttl)] = *args else {
                    return Err(at("$TTL needs exactly one TTL".into()));
                };
                scope.default_ttl = Some(parse_ttl_field(ttl).map_err(at)?);
            }
            "$INCLUDE" => self.include(args, entry.line, file, scope)?,
            _ => return Err(at(format!("unknown directive {directive}"))),
        }
        Ok(())
    }

    /// `$INCLUDE <file> [<origin>]`: parse the file with a copy of `scope`.
    fn include(
        &mut self,
        args: &[Field<'_>],
        line: usize,
        file: &Path,
        scope: &Scope,
    ) -> Result<(), LocatedError> {
        let at = |msg: String| LocatedError::new(file, line, msg);
        let (target, origin) = match *args {
            [target] => (target, None),
            [target, origin] => (target, Some(origin)),
            _ => {
                return Err(at(
                    "$INCLUDE needs a file name and an optional origin".into()
                ))
            }
        };
        let mut buf = Vec::new();
        let target = field_octets(&target, &mut buf).map_err(at)?.to_vec();
        let target =
            String::from_utf8(target).map_err(|_| at("$INCLUDE file name is not UTF-8".into()))?;

        let mut inner = scope.clone();
        match origin {
            None => {}
            Some(Field::Word(name)) => {
                parse_name(name, &scope.origin, &mut inner.origin)
                    .map_err(|m| at(format!("bad $INCLUDE origin '{name}': {m}")))?;
            }
            Some(Field::Quoted(_)) => {
                return Err(at("$INCLUDE origin cannot be a quoted string".into()))
            }
        }

        let path = match Path::new(&target) {
            p if p.is_absolute() => p.to_path_buf(),
            p => file.parent().unwrap_or(Path::new("")).join(p),
        };
        let id = canonical(&path);
        if self.open_files.contains(&id) {
            return Err(at(format!(
                "$INCLUDE loop: {} is already being read",
                path.display()
            )));
        }
        if self.open_files.len() > MAX_INCLUDE_DEPTH {
            return Err(at(format!(
                "$INCLUDE nested more than {MAX_INCLUDE_DEPTH} levels deep"
            )));
        }

        // A missing file is this line's error: name it and the path.
        if let Err(e) = std::fs::File::open(&path) {
            let full = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
            return Err(at(format!(
                "$INCLUDE {target}: cannot read {}: {e}",
                full.display()
            )));
        }
        self.stamps.extend(FileStamp::of(&path));
        self.open_files.push(id);
        let result = self.parse_file(&path, inner);
        self.open_files.pop();
        result
    }
}

/// `[<owner>] [<TTL>] [<class>] <type> <RDATA>` (TTL and class in either
/// order): the owner goes to `scope.owner`, the RDATA to `bufs.rdata`;
/// returns the type and TTL.
fn record(entry: &Entry<'_>, scope: &mut Scope, bufs: &mut Bufs) -> Result<(u16, u32), String> {
    let mut fields = entry.fields.iter();
    if entry.blank_owner {
        if scope.owner.is_empty() {
            return Err("line starts with whitespace but there is no previous owner name".into());
        }
    } else {
        match fields.next() {
            Some(Field::Word(w)) => parse_name(w, &scope.origin, &mut scope.owner)
                .map_err(|m| format!("bad owner name '{w}': {m}"))?,
            _ => return Err("owner name cannot be a quoted string".into()),
        }
    }

    let mut ttl = None;
    let mut class_seen = false;
    let rtype = loop {
        let word = match fields.next() {
            None => return Err("missing record type".into()),
            Some(Field::Quoted(_)) => {
                return Err("expected TTL, class or type, found a quoted string".into())
            }
            Some(Field::Word(w)) => w,
        };
        // Type and class mnemonics never start with a digit, so this is a TTL.
        if word.starts_with(|c: char| c.is_ascii_digit()) {
            if ttl.is_some() {
                return Err(format!("second TTL '{word}'"));
            }
            ttl = Some(parse_ttl_field(word)?);
        } else if let Some(class) = parse_class(word) {
            if class_seen {
                return Err(format!("second class '{word}'"));
            }
            class_seen = true;
            if class != 1 {
                return Err(format!("class {word} not supported"));
            }
        } else {
            break parse_type(word)?;
        }
    };
    // RFC 6895 §3.1: meta and query types never appear in zone data.
    if rtype == 0 || rtype == 41 || (128..=255).contains(&rtype) {
        return Err(format!(
            "type {} cannot appear in zone data",
            type_name(rtype)
        ));
    }

    // DNAME redirects a whole subtree (RFC 6672 §3.2): served as plain data
    // it would answer NXDOMAIN below itself, so refuse it in any form.
    if rtype == TYPE_DNAME {
        return Err(
            "DNAME is not supported (meridian does not synthesize CNAMEs, \
             RFC 6672); use a CNAME per name, or a wildcard CNAME"
                .into(),
        );
    }

    let rest = fields.as_slice();
    bufs.rdata.clear();
    match rest.first() {
        Some(Field::Word("\\#")) => {
            parse_generic(&rest[1..], &mut bufs.piece)
                .map_err(|m| format!("bad {} record: {m}", type_name(rtype)))?;
            bufs.rdata.push_bytes(&bufs.piece);
        }
        _ => known_rdata(rtype, rest, &scope.origin, bufs)?,
    }

    let ttl = match ttl.or(scope.default_ttl).or(scope.last_ttl) {
        Some(ttl) => ttl,
        // RFC 1035 style zones without $TTL: the SOA lives as long as its MINIMUM.
        None => match soa_minimum(rtype, &bufs.rdata) {
            Some(min) if min > MAX_TTL => {
                return Err(format!("SOA MINIMUM {min} is too large to use as TTL"))
            }
            Some(min) => min,
            None => return Err("no TTL and no $TTL".into()),
        },
    };
    scope.last_ttl = Some(ttl);
    Ok((rtype, ttl))
}

fn parse_ttl_field(text: &str) -> Result<u32, String> {
    let ttl = parse_ttl(text).map_err(|_| format!("bad TTL '{text}'"))?;
    if ttl > MAX_TTL {
        return Err(format!("TTL {ttl} is larger than {MAX_TTL}"));
    }
    Ok(ttl)
}

/// `text` without its first `prefix.len()` octets if they spell `prefix`
/// in any case (`prefix` is ASCII, so the rest starts on a char boundary).
fn strip_prefix_ignore_case<'x>(text: &'x str, prefix: &str) -> Option<&'x str> {
    let head = text.as_bytes().get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix.as_bytes())
        .then(|| &text[prefix.len()..])
}

/// Class mnemonic or `CLASSnnn` to its number; `None` if `text` is no class.
fn parse_class(text: &str) -> Option<u16> {
    const CLASSES: [(&str, u16); 8] = [
        ("IN", 1),
        ("CS", 2),
        ("CH", 3),
        ("CHAOS", 3),
        ("HS", 4),
        ("HESIOD", 4),
        ("NONE", 254),
        ("ANY", 255),
    ];
    if let Some(&(_, class)) = CLASSES.iter().find(|(m, _)| text.eq_ignore_ascii_case(m)) {
        return Some(class);
    }
    let num = strip_prefix_ignore_case(text, "CLASS")?;
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // An out-of-range CLASSnnn is still a class, just not IN.
    Some(num.parse().unwrap_or(0))
}

/// Type mnemonic or RFC 3597 `TYPEnnn` to its number.
fn parse_type(text: &str) -> Result<u16, String> {
    // The bulk of real zones, without the allocation below.
    const COMMON: [(&str, u16); 9] = [
        ("A", TYPE_A),
        ("AAAA", TYPE_AAAA),
        ("NS", TYPE_NS),
        ("CNAME", TYPE_CNAME),
        ("MX", TYPE_MX),
        ("TXT", TYPE_TXT),
        ("SOA", TYPE_SOA),
        ("PTR", TYPE_PTR),
        ("SRV", TYPE_SRV),
    ];
    if let Some(&(_, t)) = COMMON.iter().find(|(m, _)| text.eq_ignore_ascii_case(m)) {
        return Ok(t);
    }
    if let Some(num) = strip_prefix_ignore_case(text, "TYPE") {
        if !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()) {
            return num
                .parse()
                .map_err(|_| format!("type number in '{text}' is above 65535"));
        }
    }
    RecordType::from_str(&text.to_ascii_uppercase())
        .map(u16::from)
        .map_err(|_| format!("unknown type '{text}' (write it as TYPEnnn with RFC 3597 \\# data)"))
}

/// Mnemonic if hickory knows the type, else RFC 3597 `TYPEnnn`.
fn type_name(rtype: u16) -> String {
    match RecordType::from(rtype) {
        RecordType::Unknown(n) => format!("TYPE{n}"),
        known => known.to_string(),
    }
}

/// Domain name in master-file syntax (`@`, absolute with a trailing dot, or
/// relative to `origin`) into `out` as a lower-cased wire name. Any octet
/// is allowed (no IDNA).
fn parse_name(text: &str, origin: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    match text {
        "@" => {
            out.extend_from_slice(origin);
            return Ok(());
        }
        "." => {
            out.push(0);
            return Ok(());
        }
        "" => return Err("empty name".into()),
        _ => {}
    }
    let b = text.as_bytes();
    // Offset in `out` of the current label's length octet.
    let mut label = 0;
    out.push(0);
    // The first label over 63 octets, reported once the whole name is read.
    let mut long: Option<(usize, usize)> = None;
    let mut close = |out: &mut Vec<u8>, label: usize| {
        let len = out.len() - label - 1;
        if len > 63 {
            long.get_or_insert((label + 1, out.len()));
        }
        out[label] = len as u8;
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' => {
                if out.len() == label + 1 {
                    return Err("empty label".into());
                }
                close(out, label);
                label = out.len();
                out.push(0);
                i += 1;
            }
            b'\\' => {
                let (byte, next) = escape_at(b, i + 1)?;
                out.push(byte);
                i = next;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    // No text after the last unescaped dot: the name is absolute.
    let absolute = out.len() == label + 1;
    if !absolute {
        close(out, label);
        out.push(0);
    }
    if let Some((start, end)) = long {
        return Err(format!(
            "label '{}' is longer than 63 octets",
            String::from_utf8_lossy(&out[start..end])
        ));
    }
    if out.len() > MAX_NAME {
        return Err("name is longer than 255 octets".into());
    }
    if !absolute {
        out.pop();
        out.extend_from_slice(origin);
        if out.len() > MAX_NAME {
            return Err("name is longer than 255 octets once the origin is appended".into());
        }
    }
    // Length octets are at most 63, below 'A', so they are left alone.
    out.make_ascii_lowercase();
    Ok(())
}

// ---------------------------------------------------------------------------
// RDATA
// ---------------------------------------------------------------------------

/// RFC 3597 §5: `\# <length> <hex>...`, the fields after `\#`, decoded into `out`.
fn parse_generic(fields: &[Field<'_>], out: &mut Vec<u8>) -> Result<(), String> {
    let length = match fields.first() {
        Some(Field::Word(w)) => w
            .parse::<u16>()
            .map_err(|_| format!("RFC 3597 length '{w}' is not a number from 0 to 65535"))?,
        _ => return Err("RFC 3597 \\# needs a data length".into()),
    };
    out.clear();
    // The hex may be split into any number of fields, even mid-octet.
    let mut high: Option<u8> = None;
    for field in &fields[1..] {
        let Field::Word(w) = field else {
            return Err("RFC 3597 data must be hexadecimal".into());
        };
        if !w.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("RFC 3597 data must be hexadecimal".into());
        }
        for b in w.bytes() {
            let nibble = (b as char).to_digit(16).expect("checked hex digit") as u8;
            match high.take() {
                Some(h) => out.push(h << 4 | nibble),
                None => high = Some(nibble),
            }
        }
    }
    if high.is_some() {
        return Err("RFC 3597 data has an odd number of hex digits".into());
    }
    if out.len() != usize::from(length) {
        return Err(format!(
            "RFC 3597 length {length} does not match {} octets of data",
            out.len()
        ));
    }
    Ok(())
}

/// RDATA of a type with a text form, into `bufs.rdata`.
fn known_rdata(
    rtype: u16,
    fields: &[Field<'_>],
    origin: &[u8],
    bufs: &mut Bufs,
) -> Result<(), String> {
    let bad = |msg: String| format!("bad {} record: {msg}", type_name(rtype));
    match rtype {
        TYPE_A => {
            let addr = address_field(fields, rtype, &mut bufs.unescaped).map_err(bad)?;
            let addr = Ipv4Addr::from_str(addr)
                .map_err(|e| bad(format!("'{addr}' is not an IPv4 address ({e})")))?;
            bufs.rdata.push_bytes(&addr.octets());
        }
        TYPE_AAAA => {
            let addr = address_field(fields, rtype, &mut bufs.unescaped).map_err(bad)?;
            let addr = Ipv6Addr::from_str(addr)
                .map_err(|e| bad(format!("'{addr}' is not an IPv6 address ({e})")))?;
            bufs.rdata.push_bytes(&addr.octets());
        }
        TYPE_NS | TYPE_CNAME | TYPE_PTR => {
            expect_fields(fields, 1).map_err(bad)?;
            name_field(&fields[0], origin, &mut bufs.name).map_err(bad)?;
            bufs.rdata.push_name(&bufs.name);
        }
        TYPE_MX => {
            let mut mx = || -> Result<(), String> {
                expect_fields(fields, 2)?;
                let preference = u16_field(&fields[0], "preference")?;
                name_field(&fields[1], origin, &mut bufs.name)?;
                bufs.rdata.push_bytes(&preference.to_be_bytes());
                bufs.rdata.push_name(&bufs.name);
                Ok(())
            };
            mx().map_err(bad)?;
        }
        // One bytes piece, as hickory's canonical form (target lower-cased).
        TYPE_SRV => {
            let mut srv = || -> Result<(), String> {
                expect_fields(fields, 4)?;
                let piece = &mut bufs.piece;
                piece.clear();
                for (field, what) in fields.iter().zip(["priority", "weight", "port"]) {
                    piece.extend_from_slice(&u16_field(field, what)?.to_be_bytes());
                }
                name_field(&fields[3], origin, &mut bufs.name)?;
                piece.extend_from_slice(&bufs.name);
                bufs.rdata.push_bytes(piece);
                Ok(())
            };
            srv().map_err(bad)?;
        }
        TYPE_SOA => soa_rdata(fields, origin, bufs).map_err(bad)?,
        TYPE_TXT => txt_rdata(fields, bufs).map_err(bad)?,
        // RFC 4034 §5.3: key tag, algorithm, digest type, digest in hex
        // (which may be split by spaces): a signed delegation's DS.
        TYPE_DS => {
            let mut ds = || -> Result<(), String> {
                if fields.len() < 4 {
                    return Err(format!(
                        "expected key tag, algorithm, digest type and digest, found {} field(s)",
                        fields.len()
                    ));
                }
                let piece = &mut bufs.piece;
                piece.clear();
                piece.extend_from_slice(&u16_field(&fields[0], "key tag")?.to_be_bytes());
                for (field, what) in fields[1..3].iter().zip(["algorithm", "digest type"]) {
                    let w = word_field(field, what)?;
                    let v: u8 = w
                        .parse()
                        .map_err(|_| format!("{what} '{w}' is not a number from 0 to 255"))?;
                    piece.push(v);
                }
                let mut hex = String::new();
                for f in &fields[3..] {
                    hex.push_str(word_field(f, "digest")?);
                }
                if !hex.len().is_multiple_of(2) || hex.is_empty() {
                    return Err(format!(
                        "digest '{hex}' is not an even number of hex digits"
                    ));
                }
                for i in (0..hex.len()).step_by(2) {
                    let b = u8::from_str_radix(&hex[i..i + 2], 16)
                        .map_err(|_| format!("digest '{hex}' is not hex"))?;
                    piece.push(b);
                }
                let want = match piece[3] {
                    1 => Some(20),
                    2 => Some(32),
                    4 => Some(48),
                    _ => None,
                };
                if let Some(n) = want {
                    if piece.len() - 4 != n {
                        return Err(format!(
                            "a digest of type {} has {n} octets, not {}",
                            piece[3],
                            piece.len() - 4
                        ));
                    }
                }
                bufs.rdata.push_bytes(piece);
                Ok(())
            };
            ds().map_err(bad)?;
        }
        _ => {
            let rt = RecordType::from(rtype);
            let rdata = match rt {
                RecordType::Unknown(_) => {
                    return Err(format!(
                        "unknown type {} needs RFC 3597 \\# form",
                        type_name(rtype)
                    ))
                }
                RecordType::ANAME
                | RecordType::CAA
                | RecordType::CERT
                | RecordType::CSYNC
                | RecordType::HINFO
                | RecordType::HTTPS
                | RecordType::NAPTR
                | RecordType::OPENPGPKEY
                | RecordType::SMIMEA
                | RecordType::SSHFP
                | RecordType::SVCB
                | RecordType::TLSA => hickory_rdata(rt, fields, origin).map_err(bad)?,
                _ => {
                    return Err(format!(
                        "no text parser for type {rt}; write its data in RFC 3597 \\# form"
                    ))
                }
            };
            emit_canonical(&rdata, &mut bufs.piece)
                .map_err(|e| format!("cannot encode type {rtype}: {e}"))?;
            bufs.rdata.push_bytes(&bufs.piece);
        }
    }
    Ok(())
}

/// hickory's canonical wire form of `rdata` into `out`: no compression,
/// since these octets are copied into other messages.
fn emit_canonical(rdata: &RData, out: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    let mut enc = BinEncoder::new(out);
    enc.set_canonical_form(true);
    rdata.emit(&mut enc).map_err(|e| e.to_string())
}

fn expect_fields(fields: &[Field<'_>], count: usize) -> Result<(), String> {
    if fields.len() != count {
        return Err(format!("expected {count} field(s), found {}", fields.len()));
    }
    Ok(())
}

/// The one field of an A or AAAA record, as text.
fn address_field<'x>(
    fields: &[Field<'x>],
    rtype: u16,
    buf: &'x mut Vec<u8>,
) -> Result<&'x str, String> {
    expect_fields(fields, 1)?;
    match fields[0] {
        Field::Word(w) if !w.contains('\\') => Ok(w),
        // As when hickory parsed these: no escapes outside quotes.
        Field::Word(w) => Err(format!(
            "escapes in unquoted field '{w}' are not supported for {}; quote it or use RFC 3597 \\# form",
            type_name(rtype)
        )),
        Field::Quoted(_) => std::str::from_utf8(field_octets(&fields[0], buf)?).map_err(|_| {
            format!(
                "binary quoted strings are not supported for {}; use RFC 3597 \\# form",
                type_name(rtype)
            )
        }),
    }
}

fn name_field(field: &Field<'_>, origin: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    match *field {
        Field::Word(w) => parse_name(w, origin, out).map_err(|m| format!("bad name '{w}': {m}")),
        Field::Quoted(_) => Err("expected a domain name, found a quoted string".into()),
    }
}

fn word_field<'x>(field: &Field<'x>, what: &str) -> Result<&'x str, String> {
    match *field {
        Field::Word(w) => Ok(w),
        Field::Quoted(_) => Err(format!("{what} cannot be a quoted string")),
    }
}

fn u16_field(field: &Field<'_>, what: &str) -> Result<u16, String> {
    let w = word_field(field, what)?;
    w.parse()
        .map_err(|_| format!("{what} '{w}' is not a number from 0 to 65535"))
}

/// SOA timer field: TTL syntax (units allowed), as hickory's SOA parser does.
fn timer_field(field: &Field<'_>, what: &str) -> Result<u32, String> {
    let w = word_field(field, what)?;
    parse_ttl(w).map_err(|_| format!("{what} '{w}' is not a time value"))
}

/// MNAME and RNAME as names, then the five counters as one bytes piece.
fn soa_rdata(fields: &[Field<'_>], origin: &[u8], bufs: &mut Bufs) -> Result<(), String> {
    expect_fields(fields, 7)?;
    let serial = word_field(&fields[2], "serial")?;
    let serial = serial
        .parse::<u32>()
        .map_err(|_| format!("serial '{serial}' is not a number from 0 to 4294967295"))?;
    // RFC 1035 declares these unsigned; they were i32 in hickory's SOA, so
    // keep refusing the values it could not hold.
    let signed = |i: usize, what: &str| -> Result<u32, String> {
        let value = timer_field(&fields[i], what)?;
        if value > MAX_TTL {
            return Err(format!("{what} is above 2147483647"));
        }
        Ok(value)
    };
    name_field(&fields[0], origin, &mut bufs.name)?;
    bufs.rdata.push_name(&bufs.name);
    name_field(&fields[1], origin, &mut bufs.name)?;
    bufs.rdata.push_name(&bufs.name);
    let mut counters = [0u8; 20];
    counters[0..4].copy_from_slice(&serial.to_be_bytes());
    counters[4..8].copy_from_slice(&signed(3, "refresh")?.to_be_bytes());
    counters[8..12].copy_from_slice(&signed(4, "retry")?.to_be_bytes());
    counters[12..16].copy_from_slice(&signed(5, "expire")?.to_be_bytes());
    counters[16..20].copy_from_slice(&timer_field(&fields[6], "minimum")?.to_be_bytes());
    bufs.rdata.push_bytes(&counters);
    Ok(())
}

/// TXT: one or more <character-string>s, quoted or not, as one bytes
/// piece. Built here because hickory's lexer decodes `\DDD` wrongly and
/// ignores escapes outside quotes.
fn txt_rdata(fields: &[Field<'_>], bufs: &mut Bufs) -> Result<(), String> {
    if fields.is_empty() {
        return Err("needs at least one string".into());
    }
    bufs.piece.clear();
    for field in fields {
        let bytes = field_octets(field, &mut bufs.unescaped)?;
        if bytes.len() > 255 {
            return Err(format!(
                "string of {} octets is longer than 255",
                bytes.len()
            ));
        }
        bufs.piece.push(bytes.len() as u8);
        bufs.piece.extend_from_slice(bytes);
    }
    bufs.rdata.push_bytes(&bufs.piece);
    Ok(())
}

/// A lower-cased wire name as a hickory `Name` (for the rare types).
fn hickory_name(wire: &[u8]) -> Result<Name, String> {
    let mut labels = Vec::new();
    let mut w = wire;
    while let Some((&len, rest)) = w.split_first() {
        if len == 0 {
            break;
        }
        let label = rest
            .get(..usize::from(len))
            .ok_or("origin is not a wire name")?;
        labels.push(label);
        w = &rest[label.len()..];
    }
    Name::from_labels(labels).map_err(|e| format!("origin: {e}"))
}

/// Hands one record's RDATA to hickory's zone parser, with our origin so
/// relative names resolve, and takes the RData back out.
fn hickory_rdata(rt: RecordType, fields: &[Field<'_>], origin: &[u8]) -> Result<RData, String> {
    // hickory ignores extra fields; catch them where the count is fixed.
    match rt {
        RecordType::A | RecordType::AAAA | RecordType::ANAME => expect_fields(fields, 1)?,
        RecordType::HINFO => expect_fields(fields, 2)?,
        RecordType::CAA => expect_fields(fields, 3)?,
        _ => {}
    }
    let origin = hickory_name(origin)?;
    let mut text = format!("@ 0 IN {rt}");
    let mut buf = Vec::new();
    for field in fields {
        text.push(' ');
        match *field {
            // hickory's lexer doesn't accept `@` inside RDATA.
            Field::Word("@") => text.push_str(&origin.to_string()),
            // Its lexer and name parser read escapes differently from RFC 1035
            // (octal \DDD, escaped delimiters split fields), so don't guess.
            Field::Word(w) if w.contains('\\') => {
                return Err(format!(
                    "escapes in unquoted field '{w}' are not supported for {rt}; quote it or use RFC 3597 \\# form"
                ))
            }
            Field::Word(w) => text.push_str(w),
            Field::Quoted(_) => {
                // Re-quote with only `\"` and `\\`, which hickory decodes correctly.
                let s = std::str::from_utf8(field_octets(field, &mut buf)?).map_err(|_| {
                    format!("binary quoted strings are not supported for {rt}; use RFC 3597 \\# form")
                })?;
                text.push('"');
                for c in s.chars() {
                    if matches!(c, '"' | '\\') {
                        text.push('\\');
                    }
                    text.push(c);
                }
                text.push('"');
            }
        }
    }
    text.push('\n');

    let (_, records) = Parser::new(text, None, Some(origin))
        .parse()
        .map_err(|e| e.to_string())?;
    records
        .into_values()
        .flat_map(|set| set.into_iter())
        .map(|record| record.data)
        .next()
        .ok_or_else(|| "hickory returned no record".to_string())
}

/// The MINIMUM field of SOA RDATA, in either form: the last four octets of
/// MNAME, RNAME (at least one octet each) and five u32s.
fn soa_minimum(rtype: u16, rdata: &RdataBuf) -> Option<u32> {
    if rtype != TYPE_SOA {
        return None;
    }
    let wire = rdata.packed().to_wire();
    if wire.len() < 22 {
        return None;
    }
    let tail: [u8; 4] = wire[wire.len() - 4..].try_into().ok()?;
    Some(u32::from_be_bytes(tail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, AAAA, CNAME, MX, NS, PTR, SRV, TXT};
    use hickory_proto::serialize::binary::{BinDecoder, Restrict};
    use meridian_wire::name::{from_text, name_text};
    use meridian_wire::rdata::{Packed, Piece};
    use std::net::{Ipv4Addr, Ipv6Addr};

    const ZONE_PATH: &str = "/zones/example.com.zone";

    /// One record as the sink saw it, kept.
    #[derive(Debug, Clone)]
    struct Rec {
        owner: Vec<u8>,
        rtype: u16,
        ttl: u32,
        packed: Vec<u8>,
        file: PathBuf,
        line: usize,
    }

    impl Rec {
        fn owner_text(&self) -> String {
            name_text(&self.owner)
        }

        /// The RDATA as on the wire.
        fn wire(&self) -> Vec<u8> {
            Packed(&self.packed).to_wire()
        }

        fn pieces(&self) -> Vec<Piece<'_>> {
            Packed(&self.packed).pieces().collect()
        }

        /// The RDATA decoded by hickory.
        fn rdata(&self) -> RData {
            let wire = self.wire();
            let mut decoder = BinDecoder::new(&wire);
            RData::read(
                &mut decoder,
                RecordType::from(self.rtype),
                Restrict::new(wire.len() as u16),
            )
            .unwrap_or_else(|e| panic!("hickory cannot read {self:?}: {e}"))
        }
    }

    /// Lower-cased wire form of a plain text name.
    fn wire(s: &str) -> Vec<u8> {
        from_text(&s.to_ascii_lowercase()).unwrap()
    }

    fn origin() -> Vec<u8> {
        wire("example.com.")
    }

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    fn collector(out: &mut Vec<Rec>) -> impl FnMut(Record<'_>) -> Result<(), LocatedError> + '_ {
        |r| {
            out.push(Rec {
                owner: r.owner.to_vec(),
                rtype: r.rtype,
                ttl: r.ttl,
                packed: r.rdata.to_vec(),
                file: r.file.to_path_buf(),
                line: r.line,
            });
            Ok(())
        }
    }

    fn parse(text: &str) -> Result<Vec<Rec>, LocatedError> {
        let mut records = Vec::new();
        parse_zone_str(
            text,
            Path::new(ZONE_PATH),
            &origin(),
            &mut collector(&mut records),
        )?;
        Ok(records)
    }

    fn parse_file(path: &Path) -> Result<(Vec<Rec>, Vec<FileStamp>), LocatedError> {
        let mut records = Vec::new();
        let stamps = parse_zone_file(path, &origin(), &mut collector(&mut records))?;
        Ok((records, stamps))
    }

    fn parse_ok(text: &str) -> Vec<Rec> {
        parse(text).unwrap_or_else(|e| panic!("unexpected error: {e}"))
    }

    fn parse_err(text: &str) -> LocatedError {
        match parse(text) {
            Ok(records) => panic!("expected an error, got {records:#?}"),
            Err(e) => e,
        }
    }

    /// What hickory emits (canonical form) for `rdata`.
    fn hickory_wire(rdata: &RData) -> Vec<u8> {
        let mut out = Vec::new();
        emit_canonical(rdata, &mut out).unwrap();
        out
    }

    /// What hickory's own zone parser makes of `text` as the RDATA of `rt`.
    fn hickory_parsed(rt: RecordType, text: &str) -> Vec<u8> {
        let (_, records) = Parser::new(
            format!("@ 0 IN {rt} {text}\n"),
            None,
            Some(name("example.com.")),
        )
        .parse()
        .unwrap();
        let rdata = records.into_values().flatten().next().unwrap().data;
        hickory_wire(&rdata)
    }

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "meridian-zone-parse-{tag}-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn write(&self, file: &str, text: &str) -> PathBuf {
            let path = self.0.join(file);
            fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn basic_zone() {
        let records = parse_ok(
            "$TTL 3600\n\
             @ IN SOA ns1.example.com. hostmaster.example.com. 2024010101 7200 900 1209600 300\n\
             @ IN NS ns1.example.com.\n\
             ns1 IN A 192.0.2.1\n\
             ns1 IN AAAA 2001:db8::1\n\
             www IN CNAME ns1.example.com.\n\
             @ IN MX 10 mail.example.com.\n\
             @ IN TXT \"v=spf1 -all\" \"second string\"\n\
             _sip._udp IN SRV 10 20 5060 sip.example.com.\n\
             @ IN CAA 0 issue \"letsencrypt.org\"\n\
             1.2 IN PTR host.example.com.\n",
        );
        assert_eq!(records.len(), 10);
        assert!(records.iter().all(|r| r.ttl == 3600));
        assert_eq!(
            records.iter().map(|r| r.line).collect::<Vec<_>>(),
            (2..=11).collect::<Vec<_>>()
        );

        let RData::SOA(soa) = records[0].rdata() else {
            panic!()
        };
        assert_eq!(soa.mname, name("ns1.example.com."));
        assert_eq!(soa.rname, name("hostmaster.example.com."));
        assert_eq!(
            (soa.serial, soa.refresh, soa.retry, soa.expire, soa.minimum),
            (2024010101, 7200, 900, 1209600, 300)
        );
        assert_eq!(records[0].owner, origin());
        assert_eq!(records[0].rtype, 6);

        assert_eq!(records[1].rdata(), RData::NS(NS(name("ns1.example.com."))));
        assert_eq!(records[2].owner, wire("ns1.example.com."));
        assert_eq!(records[2].rdata(), RData::A(A(Ipv4Addr::new(192, 0, 2, 1))));
        assert_eq!(
            records[3].rdata(),
            RData::AAAA(AAAA("2001:db8::1".parse::<Ipv6Addr>().unwrap()))
        );
        assert_eq!(records[3].rtype, 28);
        assert_eq!(
            records[4].rdata(),
            RData::CNAME(CNAME(name("ns1.example.com.")))
        );
        assert_eq!(
            records[5].rdata(),
            RData::MX(MX::new(10, name("mail.example.com.")))
        );
        assert_eq!(
            records[6].rdata(),
            RData::TXT(TXT::from_bytes(vec![b"v=spf1 -all", b"second string"]))
        );
        assert_eq!(records[7].owner, wire("_sip._udp.example.com."));
        assert_eq!(
            records[7].rdata(),
            RData::SRV(SRV::new(10, 20, 5060, name("sip.example.com.")))
        );
        let RData::CAA(caa) = records[8].rdata() else {
            panic!()
        };
        assert_eq!(caa.tag, "issue");
        assert_eq!(caa.value, b"letsencrypt.org");
        assert_eq!(records[9].owner, wire("1.2.example.com."));
        assert_eq!(
            records[9].rdata(),
            RData::PTR(PTR(name("host.example.com.")))
        );
        assert!(records.iter().all(|r| r.file == Path::new(ZONE_PATH)));
    }

    /// The packed pieces are what the zone's chunks were before: names
    /// where the writer may compress them, one bytes piece otherwise.
    #[test]
    fn packed_pieces() {
        let records = parse_ok(
            "$TTL 60\n\
             @ SOA ns1 hostmaster 1 2 3 4 5\n\
             @ NS ns1\n\
             @ MX 10 mail\n\
             www CNAME @\n\
             1 PTR www\n\
             www2 A 192.0.2.1\n\
             @ TXT a b\n\
             _s._tcp SRV 1 2 3 www\n\
             @ CAA 0 issue \"ca.example\"\n\
             x TYPE65280 \\# 2 abcd\n\
             y TYPE65280 \\# 0\n",
        );
        let ns1 = wire("ns1.example.com.");
        let hm = wire("hostmaster.example.com.");
        let mail = wire("mail.example.com.");
        let www = wire("www.example.com.");
        let counters = [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5];
        assert_eq!(
            records[0].pieces(),
            [Piece::Name(&ns1), Piece::Name(&hm), Piece::Bytes(&counters)]
        );
        assert_eq!(records[1].pieces(), [Piece::Name(&ns1)]);
        assert_eq!(
            records[2].pieces(),
            [Piece::Bytes(&[0, 10]), Piece::Name(&mail)]
        );
        assert_eq!(records[3].pieces(), [Piece::Name(&origin())]);
        assert_eq!(records[4].pieces(), [Piece::Name(&www)]);
        assert_eq!(records[5].pieces(), [Piece::Bytes(&[192, 0, 2, 1])]);
        assert_eq!(records[6].pieces(), [Piece::Bytes(b"\x01a\x01b")]);
        let mut srv = vec![0, 1, 0, 2, 0, 3];
        srv.extend_from_slice(&www);
        assert_eq!(records[7].pieces(), [Piece::Bytes(&srv)]);
        assert_eq!(records[8].pieces(), [Piece::Bytes(&records[8].wire())]);
        assert_eq!(records[9].pieces(), [Piece::Bytes(&[0xab, 0xcd])]);
        assert_eq!(records[10].pieces(), []);
    }

    /// A, AAAA, TXT and SRV are encoded here; the bytes are hickory's.
    #[test]
    fn direct_encoders_match_hickory() {
        let records = parse_ok(
            "$TTL 60\n\
             a A 192.0.2.1\n\
             b A 0.0.0.0\n\
             c AAAA 2001:db8::1\n\
             d AAAA ::ffff:192.0.2.1\n\
             e AAAA \"fe80::1\"\n\
             f TXT \"v=spf1 include:_spf.example.com -all\"\n\
             g TXT \"one\" two \"three (3)\" \"\"\n\
             h SRV 10 20 5060 Sip.Example.COM.\n\
             i SRV 0 0 0 .\n",
        );
        let hickory = [
            hickory_parsed(RecordType::A, "192.0.2.1"),
            hickory_parsed(RecordType::A, "0.0.0.0"),
            hickory_parsed(RecordType::AAAA, "2001:db8::1"),
            hickory_parsed(RecordType::AAAA, "::ffff:192.0.2.1"),
            hickory_parsed(RecordType::AAAA, "fe80::1"),
            hickory_parsed(RecordType::TXT, "\"v=spf1 include:_spf.example.com -all\""),
            hickory_parsed(RecordType::TXT, "\"one\" two \"three (3)\" \"\""),
            hickory_wire(&RData::SRV(SRV::new(
                10,
                20,
                5060,
                name("Sip.Example.COM."),
            ))),
            hickory_wire(&RData::SRV(SRV::new(0, 0, 0, Name::root()))),
        ];
        assert_eq!(records.len(), hickory.len());
        for (record, expected) in records.iter().zip(&hickory) {
            assert_eq!(&record.wire(), expected, "{}", record.owner_text());
        }
        // The same through the generic hickory path used for rare types.
        let fields = [Field::Word("192.0.2.1")];
        let via = hickory_rdata(RecordType::A, &fields, &origin()).unwrap();
        assert_eq!(records[0].wire(), hickory_wire(&via));
        let fields = [Field::Word("2001:db8::1")];
        let via = hickory_rdata(RecordType::AAAA, &fields, &origin()).unwrap();
        assert_eq!(records[2].wire(), hickory_wire(&via));
        // TXT with escapes, against hickory's encoder (its text parser reads
        // \DDD as octal, which is why TXT is parsed here).
        let records = parse_ok("$TTL 60\nt TXT \"a\\\"b\\\\c\\065\" x\\ y\\059\n");
        assert_eq!(
            records[0].wire(),
            hickory_wire(&RData::TXT(TXT::from_bytes(vec![b"a\"b\\cA", b"x y;"])))
        );
    }

    #[test]
    fn long_txt_across_strings() {
        let (s1, s2, s3) = ("a".repeat(255), "b".repeat(255), "c".repeat(10));
        let records = parse_ok(&format!("$TTL 60\nt TXT \"{s1}\" {s2} \"{s3}\"\n"));
        let wire = records[0].wire();
        assert_eq!(wire.len(), 3 + 255 + 255 + 10);
        assert_eq!(
            wire,
            hickory_wire(&RData::TXT(TXT::from_bytes(vec![
                s1.as_bytes(),
                s2.as_bytes(),
                s3.as_bytes()
            ])))
        );
        assert_eq!(records[0].pieces().len(), 1);
        let RData::TXT(txt) = records[0].rdata() else {
            panic!()
        };
        assert_eq!(
            txt.txt_data.iter().map(|s| s.len()).collect::<Vec<_>>(),
            [255, 255, 10]
        );

        let e = parse_err(&format!("$TTL 60\nt TXT \"{s1}\" \"{s1}x\"\n"));
        assert_eq!(e.line, 2);
        assert_eq!(
            e.message,
            "bad TXT record: string of 256 octets is longer than 255"
        );
    }

    #[test]
    fn names_are_lower_cased() {
        let records = parse_ok(
            "$TTL 60\n\
             $ORIGIN Sub.EXAMPLE.com.\n\
             WWW CNAME Target.Other.NET.\n\
             \\065b MX 1 MAIL\n\
             @ SOA NS1 Host\\077aster 1 2 3 4 5\n",
        );
        assert_eq!(records[0].owner, wire("www.sub.example.com."));
        assert_eq!(records[0].wire(), wire("target.other.net."));
        // Escaped letters too, as the old wire_name did.
        assert_eq!(records[1].owner, wire("ab.sub.example.com."));
        assert_eq!(&records[1].wire()[2..], &wire("mail.sub.example.com.")[..]);
        let RData::SOA(soa) = records[2].rdata() else {
            panic!()
        };
        assert!(soa.mname.eq_case(&name("ns1.sub.example.com.")));
        assert!(soa.rname.eq_case(&name("hostmaster.sub.example.com.")));
    }

    #[test]
    fn sink_error_stops_the_parse() {
        let mut seen = 0;
        let mut sink = |r: Record<'_>| {
            seen += 1;
            if r.line == 3 {
                return Err(LocatedError::new(r.file, r.line, "stop here"));
            }
            Ok(())
        };
        let e = parse_zone_str(
            "$TTL 60\na A 192.0.2.1\nb A 192.0.2.2\nc A 192.0.2.3\n",
            Path::new(ZONE_PATH),
            &origin(),
            &mut sink,
        )
        .unwrap_err();
        assert_eq!(e, LocatedError::new(ZONE_PATH, 3, "stop here"));
        assert_eq!(seen, 2);
    }

    #[test]
    fn relative_names_in_owner_and_rdata() {
        let records = parse_ok(
            "$TTL 60\n\
             @ NS ns1\n\
             @ MX 10 mail\n\
             @ MX 20 @\n\
             www CNAME @\n\
             Web.Sub CNAME www\n\
             _srv._tcp SRV 0 0 443 web.sub\n\
             odd_name CNAME 1.0/25.2.0.192.in-addr.arpa.\n",
        );
        assert_eq!(records[0].rdata(), RData::NS(NS(name("ns1.example.com."))));
        assert_eq!(
            records[1].rdata(),
            RData::MX(MX::new(10, name("mail.example.com.")))
        );
        assert_eq!(
            records[2].rdata(),
            RData::MX(MX::new(20, name("example.com.")))
        );
        assert_eq!(
            records[3].rdata(),
            RData::CNAME(CNAME(name("example.com.")))
        );
        // Owners are lower-cased wire names.
        assert_eq!(records[4].owner, wire("web.sub.example.com."));
        assert_eq!(
            records[4].rdata(),
            RData::CNAME(CNAME(name("www.example.com.")))
        );
        assert_eq!(
            records[5].rdata(),
            RData::SRV(SRV::new(0, 0, 443, name("web.sub.example.com.")))
        );
        assert_eq!(records[6].owner, wire("odd_name.example.com."));
        let target = records[6].wire();
        assert_eq!(&target[2..7], b"\x040/25");
    }

    #[test]
    fn origin_directive() {
        let records = parse_ok(
            "$TTL 60\n\
             a A 192.0.2.1\n\
             $ORIGIN sub.example.com.\n\
             b A 192.0.2.2\n\
             $ORIGIN deeper\n\
             c NS ns.other.net.\n\
             d NS ns\n\
             @ A 192.0.2.3\n",
        );
        assert_eq!(records[0].owner_text(), "a.example.com.");
        assert_eq!(records[1].owner_text(), "b.sub.example.com.");
        assert_eq!(records[2].owner_text(), "c.deeper.sub.example.com.");
        assert_eq!(
            records[3].rdata(),
            RData::NS(NS(name("ns.deeper.sub.example.com.")))
        );
        assert_eq!(records[4].owner_text(), "deeper.sub.example.com.");

        let e = parse_err("$ORIGIN a..b.\n");
        assert_eq!(
            (e.line, e.message.as_str()),
            (1, "bad $ORIGIN 'a..b.': empty label")
        );
    }

    #[test]
    fn ttl_directive_units_and_fallbacks() {
        let records = parse_ok(
            "$TTL 1h30m\n\
             a A 192.0.2.1\n\
             b 1d A 192.0.2.2\n\
             c IN 2w A 192.0.2.3\n\
             d 300 IN A 192.0.2.4\n\
             e A 192.0.2.5\n",
        );
        let ttls: Vec<u32> = records.iter().map(|r| r.ttl).collect();
        assert_eq!(ttls, vec![5400, 86400, 1209600, 300, 5400]);

        // Without $TTL, the previous record's TTL carries over.
        let records = parse_ok("a 120 A 192.0.2.1\nb A 192.0.2.2\n");
        assert_eq!(records[1].ttl, 120);

        let e = parse_err("\na A 192.0.2.1\n");
        assert_eq!((e.line, e.message.as_str()), (2, "no TTL and no $TTL"));

        let e = parse_err("a 2147483648 A 192.0.2.1\n");
        assert_eq!(e.line, 1);
        assert!(e.message.contains("larger than"), "{e}");
        let e = parse_err("$TTL 3000000000\n");
        assert!(e.message.contains("larger than"), "{e}");
        let e = parse_err("a 10x A 192.0.2.1\n");
        assert!(e.message.contains("bad TTL"), "{e}");
    }

    #[test]
    fn soa_without_ttl_uses_minimum() {
        let records = parse_ok("@ IN SOA ns1 hostmaster 1 3600 600 86400 1h\nwww A 192.0.2.1\n");
        assert_eq!(records[0].ttl, 3600);
        // ... and that becomes the previous TTL for the next record.
        assert_eq!(records[1].ttl, 3600);
        let RData::SOA(soa) = records[0].rdata() else {
            panic!()
        };
        assert_eq!(soa.mname, name("ns1.example.com."));
        assert_eq!(soa.rname, name("hostmaster.example.com."));

        // In RFC 3597 form too.
        let records = parse_ok("@ SOA \\# 22 00 00 00000001 00000002 00000003 00000004 0000012c\n");
        assert_eq!(records[0].ttl, 300);
        let e = parse_err("@ SOA ns1 hostmaster 1 2 3 4 4294967295\n");
        assert_eq!(
            e.message,
            "SOA MINIMUM 4294967295 is too large to use as TTL"
        );
        let e = parse_err("@ SOA ns1 hostmaster 1 2 3 2147483648 5\n");
        assert_eq!(e.message, "bad SOA record: expire is above 2147483647");
    }

    #[test]
    fn multi_line_soa_in_parentheses() {
        let text = "$TTL 1h\n\
                    \n\
                    @ IN SOA ns1 hostmaster ( ; primary, contact\n\
                    \t2024010101 ; serial\n\
                    \t2h         ; refresh\n\
                    \t15m        ; retry\n\
                    \t2w         ; expire\n\
                    \t5m )       ; minimum\n\
                    www A 192.0.2.1\n";
        let records = parse_ok(text);
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].line, 3);
        assert_eq!(records[1].line, 9);
        let RData::SOA(soa) = records[0].rdata() else {
            panic!()
        };
        assert_eq!(
            (soa.serial, soa.refresh, soa.retry, soa.expire, soa.minimum),
            (2024010101, 7200, 900, 1209600, 300)
        );

        let e = parse_err("$TTL 1h\n@ SOA ns1 hostmaster ( 1 2 3 4 5\n\nwww A 192.0.2.1\n");
        assert_eq!((e.line, e.message.as_str()), (2, "'(' is never closed"));
        let e = parse_err("$TTL 1h\nwww A 192.0.2.1 )\n");
        assert_eq!(e.line, 2);
        let e = parse_err("$TTL 1h\n@ SOA ns1 hostmaster ( 1 2\n ( 3 4 5 ) )\n");
        assert_eq!((e.line, e.message.as_str()), (3, "nested '('"));
    }

    #[test]
    fn blank_owner_continues_previous_owner() {
        let records = parse_ok(
            "$TTL 60\n\
             www A 192.0.2.1\n\
             \x20   A 192.0.2.2\n\
             \t    AAAA 2001:db8::2\n\
             \x20   ; only a comment\n\
             mail A 192.0.2.3\n\
             \t   MX 10 mail\n",
        );
        let owners: Vec<String> = records.iter().map(Rec::owner_text).collect();
        assert_eq!(
            owners,
            vec![
                "www.example.com.",
                "www.example.com.",
                "www.example.com.",
                "mail.example.com.",
                "mail.example.com."
            ]
        );
        assert_eq!(records[2].line, 4);

        let e = parse_err("$TTL 60\n  A 192.0.2.1\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("no previous owner"), "{e}");
        // A directive indented is not a directive.
        let e = parse_err("$TTL 60\nwww A 192.0.2.1\n  $TTL 30\n");
        assert!(e.message.contains("unknown type '$TTL'"), "{e}");
    }

    #[test]
    fn include_with_origin_and_errors() {
        let dir = TempDir::new("include");
        dir.write(
            "hosts.inc",
            "; included\n\
             $TTL 120\n\
             host A 192.0.2.10\n\
             $ORIGIN elsewhere.example.\n\
             other A 192.0.2.11\n",
        );
        let main = dir.write(
            "main.zone",
            "$TTL 60\n\
             a A 192.0.2.1\n\
             $INCLUDE hosts.inc lab\n\
             b A 192.0.2.2\n\
             $INCLUDE \"hosts.inc\"\n\
             \x20 A 192.0.2.3\n",
        );
        let (records, stamps) = parse_file(&main).unwrap();
        // The main file, then the include (read twice, stamped twice).
        assert_eq!(stamps.len(), 3);
        assert_eq!(stamps[0].path, main);
        assert!(stamps.iter().all(|s| s.unchanged()));
        let got: Vec<(String, u32, PathBuf, usize)> = records
            .iter()
            .map(|r| (r.owner_text(), r.ttl, r.file.clone(), r.line))
            .collect();
        let inc = dir.0.join("hosts.inc");
        assert_eq!(
            got,
            vec![
                ("a.example.com.".into(), 60, main.clone(), 2),
                ("host.lab.example.com.".into(), 120, inc.clone(), 3),
                ("other.elsewhere.example.".into(), 120, inc.clone(), 5),
                // The include's $ORIGIN, $TTL and owner don't leak back.
                ("b.example.com.".into(), 60, main.clone(), 4),
                ("host.example.com.".into(), 120, inc.clone(), 3),
                ("other.elsewhere.example.".into(), 120, inc.clone(), 5),
                ("b.example.com.".into(), 60, main.clone(), 6),
            ]
        );

        // An error inside the included file names that file and its line.
        dir.write("bad.inc", "$TTL 60\nok A 192.0.2.1\n\nbad A 192.0.2.300\n");
        let main = dir.write("bad.zone", "$TTL 60\n$INCLUDE bad.inc\n");
        let e = parse_file(&main).unwrap_err();
        assert_eq!(e.file, dir.0.join("bad.inc"));
        assert_eq!(e.line, 4);
        assert!(e.message.starts_with("bad A record: "), "{e}");

        // A missing included file is the $INCLUDE line's error, naming it.
        let main = dir.write("missing.zone", "$TTL 60\n$INCLUDE nope.inc\n");
        let e = parse_file(&main).unwrap_err();
        assert_eq!((e.file.clone(), e.line), (main.clone(), 2));
        assert!(e.message.contains("nope.inc"), "{e}");

        // Loops are errors at the $INCLUDE line.
        dir.write("loop1.inc", "$TTL 60\n$INCLUDE loop2.inc\n");
        dir.write("loop2.inc", "\n\n$INCLUDE loop1.inc\n");
        let e = parse_file(&dir.0.join("loop1.inc")).unwrap_err();
        assert_eq!((e.file.clone(), e.line), (dir.0.join("loop2.inc"), 3));
        assert!(e.message.contains("loop"), "{e}");

        // Depth limit: a chain of 9 nested includes is too deep, 8 is fine.
        for i in 0..10 {
            dir.write(
                &format!("chain{i}.inc"),
                &format!("$INCLUDE chain{}.inc\n", i + 1),
            );
        }
        dir.write("chain10.inc", "x 60 A 192.0.2.1\n");
        assert!(parse_file(&dir.0.join("chain2.inc")).is_ok());
        let e = parse_file(&dir.0.join("chain1.inc")).unwrap_err();
        assert!(e.message.contains("nested"), "{e}");
    }

    #[test]
    fn missing_top_level_file() {
        let path = std::env::temp_dir().join("meridian-zone-parse-does-not-exist.zone");
        let e = parse_file(&path).unwrap_err();
        assert_eq!((e.file, e.line), (path, 0));
    }

    #[test]
    fn invalid_utf8_names_its_line() {
        let dir = TempDir::new("utf8");
        let path = dir.0.join("bad.zone");
        fs::write(&path, b"$TTL 60\na A 192.0.2.1\nb TXT \"\xff\"\n").unwrap();
        let e = parse_file(&path).unwrap_err();
        assert_eq!(
            (e.file, e.line, e.message.as_str()),
            (path, 3, "file is not valid UTF-8")
        );
    }

    #[test]
    fn rfc3597_generic_rdata() {
        let records = parse_ok(
            "$TTL 60\n\
             a TYPE65280 \\# 4 0A000001\n\
             b type65280 \\# 0\n\
             c A \\# 4 C000 0201\n\
             d TYPE1 192.0.2.9\n\
             e TYPE65280 \\# 3 a b c D e F\n",
        );
        assert_eq!(records[0].rtype, 65280);
        assert_eq!(records[0].wire(), [10, 0, 0, 1]);
        assert!(records[1].wire().is_empty());
        assert_eq!(records[2].rtype, 1);
        assert_eq!(records[2].wire(), [192, 0, 2, 1]);
        assert_eq!(records[3].rdata(), RData::A(A(Ipv4Addr::new(192, 0, 2, 9))));
        assert_eq!(records[4].wire(), [0xab, 0xcd, 0xef]);

        let e = parse_err("$TTL 60\n\na TYPE65280 \\# 5 0A000001\n");
        assert_eq!(e.line, 3);
        assert!(e.message.contains("length 5 does not match 4"), "{e}");
        let e = parse_err("$TTL 60\na TYPE65280 \\# 0 00\n");
        assert!(e.message.contains("does not match"), "{e}");
        let e = parse_err("$TTL 60\na TYPE65280 \\# 2 0A0\n");
        assert!(e.message.contains("odd number"), "{e}");
        let e = parse_err("$TTL 60\na TYPE65280 \\# 2 0A 0x\n");
        assert!(e.message.contains("must be hexadecimal"), "{e}");
        let e = parse_err("$TTL 60\na TYPE65280 0A000001\n");
        assert_eq!(e.message, "unknown type TYPE65280 needs RFC 3597 \\# form");
        let e = parse_err("$TTL 60\na DNSKEY 256 3 8 AwEAAa==\n");
        assert!(e.message.contains("DNSKEY"), "{e}");
        let e = parse_err("$TTL 60\na LOC 1 2 3\n");
        assert!(e.message.contains("unknown type 'LOC'"), "{e}");
        let e = parse_err("$TTL 60\na TYPE65536 \\# 0\n");
        assert!(e.message.contains("above 65535"), "{e}");
        let e = parse_err("$TTL 60\na TYPE41 \\# 0\n");
        assert_eq!(e.message, "type OPT cannot appear in zone data");
    }

    #[test]
    fn bad_a_record_reports_its_line() {
        let e = parse_err(
            "$TTL 60\n\
             ; comment\n\
             ok A 192.0.2.1\n\
             \n\
             bad A 192.0.2\n\
             later A 192.0.2.2\n",
        );
        assert_eq!(e.file, Path::new(ZONE_PATH));
        assert_eq!(e.line, 5);
        assert!(e.message.starts_with("bad A record: "), "{e}");
        assert_eq!(e.to_string(), format!("{ZONE_PATH}:5: {}", e.message));

        let e = parse_err("$TTL 60\nx A 192.0.2.1 192.0.2.2\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("expected 1 field"), "{e}");
        let e = parse_err("$TTL 60\nx AAAA 2001:db8::g\n");
        assert!(e.message.starts_with("bad AAAA record: "), "{e}");
        let e = parse_err("$TTL 60\nx AAAA 192.0.2.1\n");
        assert!(e.message.starts_with("bad AAAA record: "), "{e}");
        let e = parse_err("$TTL 60\nx A 192.0.2.\\049\n");
        assert!(e.message.contains("escapes in unquoted field"), "{e}");
        let e = parse_err("$TTL 60\nx MX 65536 mail\n");
        assert_eq!(
            e.message,
            "bad MX record: preference '65536' is not a number from 0 to 65535"
        );
    }

    #[test]
    fn class_other_than_in_is_an_error() {
        let e = parse_err("$TTL 60\nversion CH TXT \"x\"\n");
        assert_eq!((e.line, e.message.as_str()), (2, "class CH not supported"));
        let e = parse_err("$TTL 60\nx 60 HS A 192.0.2.1\n");
        assert_eq!(e.message, "class HS not supported");
        let e = parse_err("$TTL 60\nx class3 A 192.0.2.1\n");
        assert_eq!(e.message, "class class3 not supported");
        // IN in either position, any case, and CLASS1.
        let records =
            parse_ok("a IN 60 A 192.0.2.1\nb 60 in A 192.0.2.1\nc CLASS1 60 A 192.0.2.1\n");
        assert_eq!(records.len(), 3);
        let e = parse_err("$TTL 60\nx IN IN A 192.0.2.1\n");
        assert_eq!(e.message, "second class 'IN'");
    }

    #[test]
    fn unknown_directive_is_an_error() {
        let e = parse_err("$TTL 60\n$GENERATE 1-10 host$ A 192.0.2.$\n");
        assert_eq!(
            (e.line, e.message.as_str()),
            (2, "unknown directive $GENERATE")
        );
    }

    #[test]
    fn quoted_strings_and_escapes() {
        let records = parse_ok(
            "$TTL 60\n\
             a TXT \"say \\\"hi\\\"\" \"\\065\\066C\" plain \"semi;colon (paren)\"\n\
             b TXT \"multi\nline\"\n\
             c TXT \"\"\n\
             esc\\.dot\\032x A 192.0.2.1\n\
             d HINFO \"Intel x86\" \"Linux\"\n\
             e TXT \"caf\u{e9} \\\u{e9}\" \\\u{e9}t\u{e9}\n",
        );
        assert_eq!(
            records[0].rdata(),
            RData::TXT(TXT::from_bytes(vec![
                b"say \"hi\"",
                b"ABC",
                b"plain",
                b"semi;colon (paren)"
            ]))
        );
        assert_eq!(
            records[1].rdata(),
            RData::TXT(TXT::from_bytes(vec![b"multi\nline"]))
        );
        assert_eq!(records[2].rdata(), RData::TXT(TXT::from_bytes(vec![b""])));
        assert_eq!(records[3].line, 6);
        assert_eq!(&records[3].owner[..10], b"\x09esc.dot x");
        let RData::HINFO(hinfo) = records[4].rdata() else {
            panic!()
        };
        assert_eq!(&*hinfo.cpu, b"Intel x86");
        // `\X` with a multi-octet X is X.
        assert_eq!(
            records[5].rdata(),
            RData::TXT(TXT::from_bytes(vec![
                "caf\u{e9} \u{e9}".as_bytes(),
                "\u{e9}t\u{e9}".as_bytes()
            ]))
        );

        let e = parse_err("$TTL 60\na TXT \"unterminated\n\n");
        assert_eq!(
            (e.line, e.message.as_str()),
            (2, "unterminated quoted string")
        );
        let e = parse_err("$TTL 60\n\na TXT \"\\256\"\n");
        assert_eq!(
            (e.line, e.message.as_str()),
            (3, "escape \\256 is above 255")
        );
        let e = parse_err("$TTL 60\na TXT \"\\25\"\n");
        assert!(e.message.contains("three decimal digits"), "{e}");
        let e = parse_err("$TTL 60\na TXT \\25x\n");
        assert_eq!(
            e.message,
            "bad TXT record: \\DDD escape needs three decimal digits"
        );
        let e = parse_err("$TTL 60\na TXT x\\\n");
        assert_eq!(
            (e.line, e.message.as_str()),
            (2, "backslash at end of line")
        );
        let long = "x".repeat(256);
        let e = parse_err(&format!("$TTL 60\na TXT \"{long}\"\n"));
        assert!(e.message.contains("longer than 255"), "{e}");
        let e = parse_err("$TTL 60\na TXT\n");
        assert_eq!(e.message, "bad TXT record: needs at least one string");
    }

    #[test]
    fn bad_names() {
        let long_label = "a".repeat(64);
        let e = parse_err(&format!("$TTL 60\n{long_label} A 192.0.2.1\n"));
        assert_eq!(e.line, 2);
        assert!(e.message.contains("longer than 63"), "{e}");
        // The label is quoted as written.
        let e = parse_err(&format!("$TTL 60\nx.B{long_label} A 192.0.2.1\n"));
        assert!(e.message.contains(&format!("'B{long_label}'")), "{e}");

        let long_name = vec!["a".repeat(60); 5].join(".") + ".";
        let e = parse_err(&format!("$TTL 60\n{long_name} A 192.0.2.1\n"));
        assert!(e.message.contains("longer than 255"), "{e}");
        // 255 octets in all is fine, 256 is not, origin included.
        let fits = vec!["a".repeat(63); 3].join(".") + "." + &"a".repeat(61) + ".";
        assert_eq!(
            parse_ok(&format!("$TTL 60\n{fits} A 192.0.2.1\n"))[0]
                .owner
                .len(),
            255
        );
        let relative = vec!["a".repeat(63); 3].join(".") + "." + &"a".repeat(49);
        assert_eq!(
            parse_ok(&format!("$TTL 60\n{relative} A 192.0.2.1\n"))[0]
                .owner
                .len(),
            255
        );
        let e = parse_err(&format!("$TTL 60\n{relative}a A 192.0.2.1\n"));
        assert_eq!(
            e.message,
            format!("bad owner name '{relative}a': name is longer than 255 octets once the origin is appended")
        );

        let e = parse_err("$TTL 60\na..b A 192.0.2.1\n");
        assert!(e.message.contains("empty label"), "{e}");
        let e = parse_err("$TTL 60\nwww CNAME bad..target\n");
        assert!(e.message.starts_with("bad CNAME record: "), "{e}");
        let e = parse_err("$TTL 60\n\"quoted\" A 192.0.2.1\n");
        assert_eq!(e.message, "owner name cannot be a quoted string");
        let e = parse_err("$TTL 60\nwww CNAME \"quoted\"\n");
        assert_eq!(
            e.message,
            "bad CNAME record: expected a domain name, found a quoted string"
        );
        // The root, and an escaped dot that is not a separator.
        let records = parse_ok("$TTL 60\n. NS a\\.b\n");
        assert_eq!(records[0].owner, [0]);
        assert_eq!(records[0].wire(), b"\x03a.b\x07example\x03com\x00");
    }

    #[test]
    fn crlf_and_missing_final_newline() {
        let records = parse_ok("$TTL 60\r\na A 192.0.2.1\r\n  TXT \"x\"\r\nb A 192.0.2.2");
        assert_eq!(records.len(), 3);
        assert_eq!(records[1].owner, wire("a.example.com."));
        assert_eq!(records[2].line, 4);
        assert_eq!(records[2].wire(), [192, 0, 2, 2]);
    }

    #[test]
    fn ascii_space_is_char_whitespace() {
        for b in 0..0x80u8 {
            assert_eq!(is_ascii_space(b), (b as char).is_whitespace(), "{b:#x}");
        }
    }

    #[test]
    fn unicode_whitespace_separates_fields() {
        // U+00A0 and U+3000 are whitespace to the tokenizer, as before.
        let records = parse_ok("$TTL 60\na\u{a0}A\u{3000}192.0.2.1\n");
        assert_eq!(records[0].owner, wire("a.example.com."));
        assert_eq!(records[0].wire(), [192, 0, 2, 1]);
    }

    /// Records as the sink saw them (up to an error) and the outcome.
    type Outcome = (Vec<Rec>, Result<(), (PathBuf, usize, String)>);

    fn outcome(records: Vec<Rec>, result: Result<(), LocatedError>) -> Outcome {
        (records, result.map_err(|e| (e.file, e.line, e.message)))
    }

    /// `path` read through a window of `window` octets.
    fn parse_windowed(path: &Path, window: usize) -> Outcome {
        let mut records = Vec::new();
        let result =
            parse_zone_file_windowed(path, &origin(), &mut collector(&mut records), window);
        outcome(records, result.map(|_| ()))
    }

    fn same(a: &Outcome, b: &Outcome) -> bool {
        let key = |r: &Rec| {
            (
                r.owner.clone(),
                r.rtype,
                r.ttl,
                r.packed.clone(),
                r.file.clone(),
                r.line,
            )
        };
        a.1 == b.1 && a.0.iter().map(key).eq(b.0.iter().map(key))
    }

    #[test]
    fn any_window_reads_as_the_whole_text() {
        let dir = TempDir::new("windows");
        dir.write("inc.zone", "; inc\n$TTL 5\ni1 TXT \"x\ny\"\n  A 192.0.2.7");
        let texts = [
            // Comments holding quotes and parentheses, blank lines, blank owners.
            "$TTL 60\n; \"not ( a quote\n\n@ SOA ns1 hostmaster ( ; serial \" (\n 1 2 ; )\n\n 3 4\n 5 )\n  NS ns1\n\n\nns1 A 192.0.2.1 ; end\n",
            // Quoted strings across lines, escaped quotes and newlines in them.
            "$TTL 60\na TXT \"multi\nline\" \"say \\\"hi\\\"\" \"back\\\nslash\"\nb TXT ( \"one\"\n \"two\" )\n",
            // CRLF, no final newline, a final comment without newline.
            "$TTL 60\r\na A 192.0.2.1\r\n  TXT \"x\"\r\nb A 192.0.2.2",
            "$TTL 60\na A 192.0.2.1\n; the end",
            // Multi-octet characters: whitespace, escaped, in strings and names.
            "$TTL 60\na\u{a0}A\u{3000}192.0.2.1\ne TXT \"caf\u{e9} \\\u{e9}\" \\\u{e9}t\u{e9} \"\u{1f600}\"\n\u{e9}\u{1f600} A 192.0.2.3\n",
            // Escaped delimiters in words, RFC 3597 data over lines.
            "$TTL 60\nesc\\.dot\\032x\\(y A 192.0.2.1\nz TYPE65280 \\# 4 ( 0A\n 00\n 0001 )\n",
            // $INCLUDE, read through a window of its own.
            "$TTL 60\na A 192.0.2.1\n$INCLUDE inc.zone sub\n  A 192.0.2.2\n",
            // Errors, some only found at the end of the file.
            "$TTL 60\na A 192.0.2.1\nb TXT \"unterminated\n\n",
            "$TTL 60\na A 192.0.2.1\nb SOA ns1 hostmaster ( 1 2 3\n 4 5\n",
            "$TTL 60\na A 192.0.2.1\nb TXT x\\",
            "$TTL 60\na A 192.0.2.1\nb TXT x\\\nc A 192.0.2.2\n",
            "$TTL 60\na A 192.0.2.1\nb A 192.0.2.1 )\n",
            "$TTL 60\na A 192.0.2.1\nb SOA ns1 hostmaster ( 1 2\n ( 3 4 5 ) )\n",
            "$TTL 60\na A 192.0.2.1\n\n\nbad A 192.0.2.300\nc A 192.0.2.2\n",
            "$TTL 60\na TXT \"\\256\"\n",
        ];
        for (i, text) in texts.iter().enumerate() {
            let path = dir.write(&format!("{i}.zone"), text);
            let mut records = Vec::new();
            let result = parse_zone_str(text, &path, &origin(), &mut collector(&mut records));
            let whole = outcome(records, result);
            assert!(!whole.0.is_empty() || whole.1.is_err(), "{text:?}");
            for window in [1, 2, 3, 4, 5, 7, 11, 16, 64, WINDOW] {
                let got = parse_windowed(&path, window);
                assert!(
                    same(&got, &whole),
                    "{text:?}, window {window}:\n{got:#?}\nvs\n{whole:#?}"
                );
            }
        }
    }

    #[test]
    fn invalid_utf8_in_any_window() {
        let dir = TempDir::new("utf8-windows");
        let texts: [&[u8]; 6] = [
            b"$TTL 60\na A 192.0.2.1\nb TXT \"\xff\"\n",
            b"\xff",
            // A character cut short by the end of the file.
            b"$TTL 60\na A 192.0.2.1\nb TXT \"\xe2\x82",
            // A lead octet followed by ASCII, and in a comment.
            b"$TTL 60\na A 192.0.2.1\n\nb TXT \"\xe2\x82x\"\n",
            b"$TTL 60\na A 192.0.2.1 ; \xc3(\n",
            // Inside an entry over several lines: the line of the octet.
            b"$TTL 60\na TXT ( \"x\"\n\n \"\xf0\x9f\x98\"\n)\n",
        ];
        for (i, text) in texts.iter().enumerate() {
            let path = dir.0.join(format!("{i}.zone"));
            fs::write(&path, text).unwrap();
            let valid = std::str::from_utf8(text).unwrap_err().valid_up_to();
            let line = text[..valid].iter().filter(|&&b| b == b'\n').count() + 1;
            for window in [1, 2, 3, 4, 5, 8, 64, WINDOW] {
                let (_, result) = parse_windowed(&path, window);
                assert_eq!(
                    result,
                    Err((path.clone(), line, "file is not valid UTF-8".into())),
                    "{text:?}, window {window}"
                );
            }
        }

        // Errors come in file order: one before the invalid octet wins.
        let path = dir.0.join("order.zone");
        fs::write(&path, b"$TTL 60\nbad A 192.0.2\n\xff\n").unwrap();
        for window in [1, 5, 64, WINDOW] {
            let (_, result) = parse_windowed(&path, window);
            let (file, line, message) = result.unwrap_err();
            assert_eq!((file, line), (path.clone(), 2));
            assert!(message.starts_with("bad A record: "), "{message}");
        }
    }

    #[test]
    fn entry_longer_than_the_window() {
        let dir = TempDir::new("long-entry");
        // A TXT record of 16384 strings of 255 octets, one per line: 4.3 MB.
        let strings = 16384;
        let chunk = "x".repeat(255);
        let mut text = String::from("$TTL 60\nbig TXT (\n");
        for i in 0..strings {
            text.push_str(&format!(" \"{chunk}\" ; {i}\n"));
        }
        text.push_str(")\nafter A 192.0.2.1\n");
        assert!(text.len() > 4_000_000);
        let path = dir.write("big.zone", &text);
        for window in [64, 4096] {
            let (records, result) = parse_windowed(&path, window);
            result.unwrap();
            assert_eq!(records.len(), 2);
            assert_eq!((records[0].rtype, records[0].line), (TYPE_TXT, 2));
            assert_eq!(records[0].wire().len(), strings * 256);
            assert_eq!(records[1].line, strings + 4);
            assert_eq!(records[1].wire(), [192, 0, 2, 1]);
        }

        // A string too long for TXT, over a window and many lines: its first line.
        let path = dir.write(
            "long-string.zone",
            &format!("$TTL 60\n\nbad TXT \"{}\"\n", "x\n".repeat(100_000)),
        );
        let (_, result) = parse_windowed(&path, 64);
        let (_, line, message) = result.unwrap_err();
        assert_eq!(line, 3);
        assert!(message.contains("longer than 255"), "{message}");
    }
}
