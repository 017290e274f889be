//! Master-file parser (RFC 1035 §5) that reports `file:line` for every error.
//!
//! The tokenizer, the directives (`$ORIGIN`, `$TTL`, `$INCLUDE`), owner names,
//! the TTL/class/type fields and the RFC 3597 §5 generic RDATA form
//! (`\# <length> <hex>`) are handled here. hickory's own zone parser can't say
//! which line failed and rejects unknown types, so it is only used for the
//! RDATA text of types we don't parse ourselves (A, AAAA, CAA, HINFO, SSHFP,
//! TLSA, SVCB, ...), one record at a time.
//!
//! NS, CNAME, PTR, MX, SRV, SOA and TXT RDATA are built here instead, because
//! hickory's text path lowercases names and passes them through IDNA (so
//! `foo_bar` or RFC 2317 `0/25` labels fail), reads `\DDD` as octal, and
//! rejects `@` in RDATA.
//!
//! Scope of `$INCLUDE`: the included file starts with the includer's origin
//! (or the origin given on the `$INCLUDE` line), `$TTL`, previous owner and
//! previous TTL. Nothing it changes leaks back: after the include the
//! including file carries on with its own state (RFC 1035 §5.1 requires this
//! for the origin; we do the same for the rest so each file reads on its own).
//!
//! Zone semantics (SOA at the apex, CNAME conflicts, out-of-zone data) are
//! checked elsewhere, using the `file`/`line` of each record.

use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use hickory_proto::rr::rdata::{CNAME, MX, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, RecordType};
use hickory_proto::serialize::txt::{parse_ttl, Parser};

use super::stamp::FileStamp;
use crate::error::LocatedError;

/// The record data as parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceRdata {
    /// A type hickory knows (A, AAAA, NS, CNAME, SOA, MX, TXT, SRV, CAA, PTR,
    /// and whatever else hickory parses).
    Known(RData),
    /// RFC 3597 generic form `\# <len> <hex...>` (for any type, including
    /// TYPEnnn and known types), raw wire bytes.
    Raw(Vec<u8>),
}

/// One record as read from a master file, before it joins a zone.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceRecord {
    /// Absolute (fqdn), case as written.
    pub owner: Name,
    /// Numeric type (TYPE65280 -> 65280).
    pub rtype: u16,
    /// TTL in seconds: as written, else `$TTL`, else the previous record's
    /// (an SOA without any of these takes its MINIMUM).
    pub ttl: u32,
    /// The RDATA as parsed.
    pub rdata: SourceRdata,
    /// The file the record came from (the `$INCLUDE`d file for included records).
    pub file: PathBuf,
    /// 1-based line where the record starts.
    pub line: usize,
}

/// How many `$INCLUDE`s may be nested below the top-level file.
const MAX_INCLUDE_DEPTH: usize = 8;

/// RFC 2181 §8: TTLs are 31-bit.
const MAX_TTL: u32 = 0x7fff_ffff;

/// Parse `path` with initial origin `origin` (an fqdn). Follows `$INCLUDE`
/// relative to the including file's directory. Returns the records and a
/// stamp of every file read (taken before reading it), for reloads.
pub fn parse_zone_file_old(
    path: &Path,
    origin: &Name,
) -> Result<(Vec<SourceRecord>, Vec<FileStamp>), LocatedError> {
    let stamp = FileStamp::of(path);
    let text = read_zone_text(path)?;
    let mut origin = origin.clone();
    origin.set_fqdn(true);
    let mut loader = Loader {
        records: Vec::new(),
        open_files: vec![canonical(path)],
        stamps: stamp.into_iter().collect(),
    };
    loader.parse_text(&text, path, Scope::new(origin))?;
    Ok((loader.records, loader.stamps))
}

/// Same, from text already in memory (`path` is used for messages and
/// relative `$INCLUDE`).
pub fn parse_zone_str_old(
    text: &str,
    path: &Path,
    origin: &Name,
) -> Result<Vec<SourceRecord>, LocatedError> {
    let mut origin = origin.clone();
    origin.set_fqdn(true);
    let mut loader = Loader {
        records: Vec::new(),
        open_files: vec![canonical(path)],
        stamps: Vec::new(),
    };
    loader.parse_text(text, path, Scope::new(origin))?;
    Ok(loader.records)
}

/// Reads a zone file; errors name the file with line 0, or the line of the
/// first invalid UTF-8 byte.
fn read_zone_text(path: &Path) -> Result<String, LocatedError> {
    let bytes =
        fs::read(path).map_err(|e| LocatedError::new(path, 0, format!("cannot read file: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        LocatedError::new(path, line, "file is not valid UTF-8")
    })
}

/// Best-effort identity of a file for include-loop detection.
fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

// ---------------------------------------------------------------------------
// Tokenizer
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Field {
    /// An unquoted field, exactly as written (backslash escapes kept, since
    /// their meaning depends on whether the field is a name or a string).
    Word(String),
    /// A `"..."` field with its escapes decoded.
    Quoted(Vec<u8>),
}

/// One logical entry: a directive or a record, possibly spanning lines
/// through `( ... )` or a quoted string.
#[derive(Debug)]
struct Entry {
    /// Line of the first field.
    line: usize,
    /// The line started with whitespace: the record reuses the previous owner.
    blank_owner: bool,
    fields: Vec<Field>,
}

/// Splits a master file into entries. Errors carry the line they occur on.
fn tokenize(text: &str) -> Result<Vec<Entry>, (usize, String)> {
    fn push(entry: &mut Entry, line: usize, field: Field) {
        if entry.fields.is_empty() {
            entry.line = line;
        }
        entry.fields.push(field);
    }
    fn finish(entries: &mut Vec<Entry>, entry: &mut Entry) {
        let done = std::mem::replace(
            entry,
            Entry {
                line: 0,
                blank_owner: false,
                fields: Vec::new(),
            },
        );
        if !done.fields.is_empty() {
            entries.push(done);
        }
    }

    let mut entries = Vec::new();
    let mut entry = Entry {
        line: 0,
        blank_owner: false,
        fields: Vec::new(),
    };
    let mut line = 1;
    let mut at_line_start = true;
    // Line of the open '(' while inside a group; newlines don't end entries then.
    let mut open_paren: Option<usize> = None;
    let mut chars = text.chars().peekable();

    while let Some(c) = chars.next() {
        let line_start = std::mem::replace(&mut at_line_start, false);
        match c {
            '\n' => {
                line += 1;
                at_line_start = true;
                if open_paren.is_none() {
                    finish(&mut entries, &mut entry);
                }
            }
            ' ' | '\t' if line_start && open_paren.is_none() => entry.blank_owner = true,
            c if c.is_whitespace() => {}
            ';' => while chars.next_if(|&n| n != '\n').is_some() {},
            '(' => {
                if open_paren.is_some() {
                    return Err((line, "nested '('".into()));
                }
                open_paren = Some(line);
            }
            ')' => {
                if open_paren.take().is_none() {
                    return Err((line, "')' without a matching '('".into()));
                }
            }
            '"' => {
                let start = line;
                let mut raw = String::new();
                loop {
                    match chars.next() {
                        None => return Err((start, "unterminated quoted string".into())),
                        Some('"') => break,
                        Some(c) => {
                            // Keep `\x` pairs together so `\"` doesn't end the string.
                            let escaped = if c == '\\' { chars.next() } else { None };
                            for c in std::iter::once(c).chain(escaped) {
                                if c == '\n' {
                                    line += 1;
                                }
                                raw.push(c);
                            }
                        }
                    }
                }
                let bytes = unescape(&raw).map_err(|m| (start, m))?;
                push(&mut entry, start, Field::Quoted(bytes));
            }
            c => {
                let mut word = String::new();
                let mut next = Some(c);
                while let Some(c) = next {
                    word.push(c);
                    if c == '\\' {
                        // An escaped delimiter (`\ `, `\;`, `\(`) stays in the word.
                        match chars.next() {
                            Some(e) if e != '\n' => word.push(e),
                            _ => return Err((line, "backslash at end of line".into())),
                        }
                    }
                    next = chars.next_if(|&n| !n.is_whitespace() && !matches!(n, ';' | '(' | ')'));
                }
                push(&mut entry, line, Field::Word(word));
            }
        }
    }
    if let Some(open) = open_paren {
        return Err((open, "'(' is never closed".into()));
    }
    finish(&mut entries, &mut entry);
    Ok(entries)
}

/// Decodes RFC 1035 §5.1 escapes: `\DDD` is a decimal octet, `\X` is X.
fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            push_escape(&mut chars, &mut out)?;
        } else {
            push_char(&mut out, c);
        }
    }
    Ok(out)
}

/// Decodes the escape after a backslash into `out`.
fn push_escape(chars: &mut std::str::Chars<'_>, out: &mut Vec<u8>) -> Result<(), String> {
    match chars.next() {
        None => Err("backslash at end of field".into()),
        Some(d1) if d1.is_ascii_digit() => {
            let digits = [Some(d1), chars.next(), chars.next()];
            let mut value = 0u32;
            for d in digits {
                match d.and_then(|d| d.to_digit(10)) {
                    Some(d) => value = value * 10 + d,
                    None => return Err("\\DDD escape needs three decimal digits".into()),
                }
            }
            let byte = u8::try_from(value).map_err(|_| format!("escape \\{value} is above 255"))?;
            out.push(byte);
            Ok(())
        }
        Some(c) => {
            push_char(out, c);
            Ok(())
        }
    }
}

fn push_char(out: &mut Vec<u8>, c: char) {
    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
}

// ---------------------------------------------------------------------------
// Entries
// ---------------------------------------------------------------------------

/// Parser state that `$INCLUDE` hands down to the included file.
#[derive(Clone)]
struct Scope {
    origin: Name,
    /// From `$TTL`.
    default_ttl: Option<u32>,
    /// TTL of the previous record, the RFC 1035 fallback.
    last_ttl: Option<u32>,
    /// Owner for lines that start with whitespace.
    last_owner: Option<Name>,
}

impl Scope {
    fn new(origin: Name) -> Self {
        Scope {
            origin,
            default_ttl: None,
            last_ttl: None,
            last_owner: None,
        }
    }
}

struct Loader {
    records: Vec<SourceRecord>,
    /// Files being read, outermost first: include depth and loop detection.
    open_files: Vec<PathBuf>,
    /// Every file read, stamped before reading.
    stamps: Vec<FileStamp>,
}

impl Loader {
    fn parse_text(
        &mut self,
        text: &str,
        file: &Path,
        mut scope: Scope,
    ) -> Result<(), LocatedError> {
        let entries = tokenize(text).map_err(|(line, msg)| LocatedError::new(file, line, msg))?;
        for entry in &entries {
            match &entry.fields[0] {
                // Directives only count at the start of a line.
                Field::Word(w) if w.starts_with('$') && !entry.blank_owner => {
                    self.directive(entry, file, &mut scope)?
                }
                _ => {
                    let record = record(entry, file, &mut scope)
                        .map_err(|msg| LocatedError::new(file, entry.line, msg))?;
                    self.records.push(record);
                }
            }
        }
        Ok(())
    }

    fn directive(
        &mut self,
        entry: &Entry,
        file: &Path,
        scope: &mut Scope,
    ) -> Result<(), LocatedError> {
        let at = |msg: String| LocatedError::new(file, entry.line, msg);
        let Field::Word(directive) = &entry.fields[0] else {
            unreachable!("directives are words")
        };
        let args = &entry.fields[1..];
        match directive.to_ascii_uppercase().as_str() {
            "$ORIGIN" => {
                let [Field::Word(name)] = args else {
                    return Err(at("$ORIGIN needs exactly one domain name".into()));
                };
                scope.origin = parse_name(name, &scope.origin)
                    .map_err(|m| at(format!("bad $ORIGIN '{name}': {m}")))?;
            }
            "$TTL" => {
                let [Field::Word(ttl)] = args else {
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
        args: &[Field],
        line: usize,
        file: &Path,
        scope: &Scope,
    ) -> Result<(), LocatedError> {
        let at = |msg: String| LocatedError::new(file, line, msg);
        let (target, origin) = match args {
            [target] => (target, None),
            [target, origin] => (target, Some(origin)),
            _ => {
                return Err(at(
                    "$INCLUDE needs a file name and an optional origin".into()
                ))
            }
        };
        let target = match target {
            Field::Word(w) => unescape(w).map_err(at)?,
            Field::Quoted(bytes) => bytes.clone(),
        };
        let target =
            String::from_utf8(target).map_err(|_| at("$INCLUDE file name is not UTF-8".into()))?;

        let mut inner = scope.clone();
        match origin {
            None => {}
            Some(Field::Word(name)) => {
                inner.origin = parse_name(name, &scope.origin)
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

        self.stamps.extend(FileStamp::of(&path));
        let text = read_zone_text(&path)?;
        self.open_files.push(id);
        let result = self.parse_text(&text, &path, inner);
        self.open_files.pop();
        result
    }
}

/// `[<owner>] [<TTL>] [<class>] <type> <RDATA>` (TTL and class in either order).
fn record(entry: &Entry, file: &Path, scope: &mut Scope) -> Result<SourceRecord, String> {
    let mut fields = entry.fields.iter();
    let owner = if entry.blank_owner {
        scope
            .last_owner
            .clone()
            .ok_or("line starts with whitespace but there is no previous owner name")?
    } else {
        match fields.next() {
            Some(Field::Word(w)) => {
                parse_name(w, &scope.origin).map_err(|m| format!("bad owner name '{w}': {m}"))?
            }
            _ => return Err("owner name cannot be a quoted string".into()),
        }
    };
    scope.last_owner = Some(owner.clone());

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

    let rest = fields.as_slice();
    let rdata = match rest.first() {
        Some(Field::Word(w)) if w == "\\#" => SourceRdata::Raw(
            parse_generic(&rest[1..])
                .map_err(|m| format!("bad {} record: {m}", type_name(rtype)))?,
        ),
        _ => SourceRdata::Known(known_rdata(rtype, rest, &scope.origin)?),
    };

    let ttl = match ttl.or(scope.default_ttl).or(scope.last_ttl) {
        Some(ttl) => ttl,
        // RFC 1035 style zones without $TTL: the SOA lives as long as its MINIMUM.
        None => match soa_minimum(rtype, &rdata) {
            Some(min) if min > MAX_TTL => {
                return Err(format!("SOA MINIMUM {min} is too large to use as TTL"))
            }
            Some(min) => min,
            None => return Err("no TTL and no $TTL".into()),
        },
    };
    scope.last_ttl = Some(ttl);

    Ok(SourceRecord {
        owner,
        rtype,
        ttl,
        rdata,
        file: file.to_path_buf(),
        line: entry.line,
    })
}

fn parse_ttl_field(text: &str) -> Result<u32, String> {
    let ttl = parse_ttl(text).map_err(|_| format!("bad TTL '{text}'"))?;
    if ttl > MAX_TTL {
        return Err(format!("TTL {ttl} is larger than {MAX_TTL}"));
    }
    Ok(ttl)
}

/// Class mnemonic or `CLASSnnn` to its number; `None` if `text` is no class.
fn parse_class(text: &str) -> Option<u16> {
    let upper = text.to_ascii_uppercase();
    match upper.as_str() {
        "IN" => Some(1),
        "CS" => Some(2),
        "CH" | "CHAOS" => Some(3),
        "HS" | "HESIOD" => Some(4),
        "NONE" => Some(254),
        "ANY" => Some(255),
        _ => {
            let num = upper.strip_prefix("CLASS")?;
            if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // An out-of-range CLASSnnn is still a class, just not IN.
            Some(num.parse().unwrap_or(0))
        }
    }
}

/// Type mnemonic or RFC 3597 `TYPEnnn` to its number.
fn parse_type(text: &str) -> Result<u16, String> {
    let upper = text.to_ascii_uppercase();
    if let Some(num) = upper.strip_prefix("TYPE") {
        if !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()) {
            return num
                .parse()
                .map_err(|_| format!("type number in '{text}' is above 65535"));
        }
    }
    RecordType::from_str(&upper)
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

/// Domain name in master-file syntax: `@`, absolute (trailing dot) or
/// relative to `origin`. Case and any octet are kept as written (no IDNA).
fn parse_name(text: &str, origin: &Name) -> Result<Name, String> {
    match text {
        "@" => return Ok(origin.clone()),
        "." => return Ok(Name::root()),
        "" => return Err("empty name".into()),
        _ => {}
    }
    let mut labels: Vec<Vec<u8>> = Vec::new();
    let mut label = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if label.is_empty() {
                    return Err("empty label".into());
                }
                labels.push(std::mem::take(&mut label));
            }
            '\\' => push_escape(&mut chars, &mut label)?,
            c => push_char(&mut label, c),
        }
    }
    // No text after the last unescaped dot: the name is absolute.
    let absolute = label.is_empty();
    if !absolute {
        labels.push(label);
    }
    if let Some(long) = labels.iter().find(|l| l.len() > 63) {
        return Err(format!(
            "label '{}' is longer than 63 octets",
            String::from_utf8_lossy(long)
        ));
    }
    let name =
        Name::from_labels(labels).map_err(|_| "name is longer than 255 octets".to_string())?;
    if absolute {
        Ok(name)
    } else {
        name.append_domain(origin)
            .map_err(|_| "name is longer than 255 octets once the origin is appended".to_string())
    }
}

// ---------------------------------------------------------------------------
// RDATA
// ---------------------------------------------------------------------------

/// RFC 3597 §5: `\# <length> <hex>...`, the fields after `\#`.
fn parse_generic(fields: &[Field]) -> Result<Vec<u8>, String> {
    let length = match fields.first() {
        Some(Field::Word(w)) => w
            .parse::<u16>()
            .map_err(|_| format!("RFC 3597 length '{w}' is not a number from 0 to 65535"))?,
        _ => return Err("RFC 3597 \\# needs a data length".into()),
    };
    // The hex may be split into any number of fields.
    let mut hex = String::new();
    for field in &fields[1..] {
        match field {
            Field::Word(w) if w.bytes().all(|b| b.is_ascii_hexdigit()) => hex.push_str(w),
            _ => return Err("RFC 3597 data must be hexadecimal".into()),
        }
    }
    if !hex.len().is_multiple_of(2) {
        return Err("RFC 3597 data has an odd number of hex digits".into());
    }
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("checked hex digits"))
        .collect();
    if bytes.len() != usize::from(length) {
        return Err(format!(
            "RFC 3597 length {length} does not match {} octets of data",
            bytes.len()
        ));
    }
    Ok(bytes)
}

/// RDATA of a type with a text form.
fn known_rdata(rtype: u16, fields: &[Field], origin: &Name) -> Result<RData, String> {
    let rt = RecordType::from(rtype);
    let bad = |msg: String| format!("bad {rt} record: {msg}");
    match rt {
        RecordType::Unknown(_) => Err(format!(
            "unknown type {} needs RFC 3597 \\# form",
            type_name(rtype)
        )),
        RecordType::NS | RecordType::CNAME | RecordType::PTR => {
            expect_fields(fields, 1).map_err(bad)?;
            let name = name_field(&fields[0], origin).map_err(bad)?;
            Ok(match rt {
                RecordType::NS => RData::NS(NS(name)),
                RecordType::CNAME => RData::CNAME(CNAME(name)),
                _ => RData::PTR(PTR(name)),
            })
        }
        RecordType::MX => {
            let mx = || -> Result<RData, String> {
                expect_fields(fields, 2)?;
                let preference = u16_field(&fields[0], "preference")?;
                Ok(RData::MX(MX::new(
                    preference,
                    name_field(&fields[1], origin)?,
                )))
            };
            mx().map_err(bad)
        }
        RecordType::SRV => {
            let srv = || -> Result<RData, String> {
                expect_fields(fields, 4)?;
                Ok(RData::SRV(SRV::new(
                    u16_field(&fields[0], "priority")?,
                    u16_field(&fields[1], "weight")?,
                    u16_field(&fields[2], "port")?,
                    name_field(&fields[3], origin)?,
                )))
            };
            srv().map_err(bad)
        }
        RecordType::SOA => soa_rdata(fields, origin).map_err(bad),
        RecordType::TXT => txt_rdata(fields).map_err(bad),
        RecordType::A
        | RecordType::AAAA
        | RecordType::ANAME
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
        | RecordType::TLSA => hickory_rdata(rt, fields, origin).map_err(bad),
        _ => Err(format!(
            "no text parser for type {rt}; write its data in RFC 3597 \\# form"
        )),
    }
}

fn expect_fields(fields: &[Field], count: usize) -> Result<(), String> {
    if fields.len() != count {
        return Err(format!("expected {count} field(s), found {}", fields.len()));
    }
    Ok(())
}

fn name_field(field: &Field, origin: &Name) -> Result<Name, String> {
    match field {
        Field::Word(w) => parse_name(w, origin).map_err(|m| format!("bad name '{w}': {m}")),
        Field::Quoted(_) => Err("expected a domain name, found a quoted string".into()),
    }
}

fn word_field<'a>(field: &'a Field, what: &str) -> Result<&'a str, String> {
    match field {
        Field::Word(w) => Ok(w),
        Field::Quoted(_) => Err(format!("{what} cannot be a quoted string")),
    }
}

fn u16_field(field: &Field, what: &str) -> Result<u16, String> {
    let w = word_field(field, what)?;
    w.parse()
        .map_err(|_| format!("{what} '{w}' is not a number from 0 to 65535"))
}

/// SOA timer field: TTL syntax (units allowed), as hickory's SOA parser does.
fn timer_field(field: &Field, what: &str) -> Result<u32, String> {
    let w = word_field(field, what)?;
    parse_ttl(w).map_err(|_| format!("{what} '{w}' is not a time value"))
}

fn soa_rdata(fields: &[Field], origin: &Name) -> Result<RData, String> {
    expect_fields(fields, 7)?;
    let serial = word_field(&fields[2], "serial")?;
    let serial = serial
        .parse::<u32>()
        .map_err(|_| format!("serial '{serial}' is not a number from 0 to 4294967295"))?;
    // RFC 1035 declares these unsigned, hickory stores them as i32.
    let signed = |i: usize, what: &str| -> Result<i32, String> {
        i32::try_from(timer_field(&fields[i], what)?)
            .map_err(|_| format!("{what} is above 2147483647"))
    };
    Ok(RData::SOA(SOA::new(
        name_field(&fields[0], origin)?,
        name_field(&fields[1], origin)?,
        serial,
        signed(3, "refresh")?,
        signed(4, "retry")?,
        signed(5, "expire")?,
        timer_field(&fields[6], "minimum")?,
    )))
}

/// TXT: one or more <character-string>s, quoted or not. Built here because
/// hickory's lexer decodes `\DDD` wrongly and ignores escapes outside quotes.
fn txt_rdata(fields: &[Field]) -> Result<RData, String> {
    if fields.is_empty() {
        return Err("needs at least one string".into());
    }
    let strings = fields
        .iter()
        .map(|field| {
            let bytes = match field {
                Field::Quoted(bytes) => bytes.clone(),
                Field::Word(w) => unescape(w)?,
            };
            if bytes.len() > 255 {
                return Err(format!(
                    "string of {} octets is longer than 255",
                    bytes.len()
                ));
            }
            Ok(bytes)
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(RData::TXT(TXT::from_bytes(
        strings.iter().map(Vec::as_slice).collect(),
    )))
}

/// Hands one record's RDATA to hickory's zone parser, with our origin so
/// relative names resolve, and takes the RData back out.
fn hickory_rdata(rt: RecordType, fields: &[Field], origin: &Name) -> Result<RData, String> {
    // hickory ignores extra fields; catch them where the count is fixed.
    match rt {
        RecordType::A | RecordType::AAAA | RecordType::ANAME => expect_fields(fields, 1)?,
        RecordType::HINFO => expect_fields(fields, 2)?,
        RecordType::CAA => expect_fields(fields, 3)?,
        _ => {}
    }
    let mut text = format!("@ 0 IN {rt}");
    for field in fields {
        text.push(' ');
        match field {
            // hickory's lexer doesn't accept `@` inside RDATA.
            Field::Word(w) if w == "@" => text.push_str(&origin.to_string()),
            // Its lexer and name parser read escapes differently from RFC 1035
            // (octal \DDD, escaped delimiters split fields), so don't guess.
            Field::Word(w) if w.contains('\\') => {
                return Err(format!(
                    "escapes in unquoted field '{w}' are not supported for {rt}; quote it or use RFC 3597 \\# form"
                ))
            }
            Field::Word(w) => text.push_str(w),
            Field::Quoted(bytes) => {
                // Re-quote with only `\"` and `\\`, which hickory decodes correctly.
                let s = std::str::from_utf8(bytes).map_err(|_| {
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

    let (_, records) = Parser::new(text, None, Some(origin.clone()))
        .parse()
        .map_err(|e| e.to_string())?;
    records
        .into_values()
        .flat_map(|set| set.into_iter())
        .map(|record| record.data)
        .next()
        .ok_or_else(|| "hickory returned no record".to_string())
}

/// The MINIMUM field of SOA RDATA, in either form.
fn soa_minimum(rtype: u16, rdata: &SourceRdata) -> Option<u32> {
    match rdata {
        SourceRdata::Known(RData::SOA(soa)) => Some(soa.minimum),
        // Wire form: MNAME, RNAME (at least one octet each), then five u32s; MINIMUM is last.
        SourceRdata::Raw(bytes) if rtype == u16::from(RecordType::SOA) && bytes.len() >= 22 => {
            let tail: [u8; 4] = bytes[bytes.len() - 4..].try_into().ok()?;
            Some(u32::from_be_bytes(tail))
        }
        _ => None,
    }
}

// Temporary adapter to the streaming interface (replaced by the streaming parser).
/// One record as read, lent to the sink for the duration of the call.
pub struct Record<'a> {
    /// Absolute owner name, lower-cased wire form.
    pub owner: &'a [u8],
    /// Numeric type.
    pub rtype: u16,
    /// TTL in seconds.
    pub ttl: u32,
    /// The RDATA, packed (`RdataBuf` form).
    pub rdata: &'a [u8],
    /// The file the record came from.
    pub file: &'a Path,
    /// 1-based line where the record starts.
    pub line: usize,
}

/// Where records go.
pub type Sink<'s> = dyn FnMut(Record<'_>) -> Result<(), LocatedError> + 's;

fn name_of_wire(origin: &[u8]) -> Name {
    Name::from_ascii(meridian_wire::name::name_text(origin)).expect("a valid origin")
}

fn feed(records: Vec<SourceRecord>, sink: &mut Sink<'_>) -> Result<(), LocatedError> {
    let mut buf = meridian_wire::RdataBuf::new();
    for r in records {
        to_chunks(&mut buf, r.rtype, &r.rdata)
            .map_err(|m| LocatedError::new(&r.file, r.line, m))?;
        let owner = super::wire_name(&r.owner);
        sink(Record {
            owner: &owner,
            rtype: r.rtype,
            ttl: r.ttl,
            rdata: buf.as_bytes(),
            file: &r.file,
            line: r.line,
        })?;
    }
    Ok(())
}

/// Parse a file.
pub fn parse_zone_file(
    path: &Path,
    origin: &[u8],
    sink: &mut Sink<'_>,
) -> Result<Vec<FileStamp>, LocatedError> {
    let (records, stamps) = parse_zone_file_old(path, &name_of_wire(origin))?;
    feed(records, sink)?;
    Ok(stamps)
}

/// Parse text.
pub fn parse_zone_str(
    text: &str,
    path: &Path,
    origin: &[u8],
    sink: &mut Sink<'_>,
) -> Result<(), LocatedError> {
    feed(parse_zone_str_old(text, path, &name_of_wire(origin))?, sink)
}

fn to_chunks(
    buf: &mut meridian_wire::RdataBuf,
    rtype: u16,
    rd: &SourceRdata,
) -> Result<(), String> {
    use super::wire_name;
    use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
    buf.clear();
    let known = match rd {
        SourceRdata::Raw(b) => {
            buf.push_bytes(b);
            return Ok(());
        }
        SourceRdata::Known(k) => k,
    };
    match known {
        RData::NS(n) => buf.push_name(&wire_name(&n.0)),
        RData::CNAME(n) => buf.push_name(&wire_name(&n.0)),
        RData::PTR(n) => buf.push_name(&wire_name(&n.0)),
        RData::MX(mx) => {
            buf.push_bytes(&mx.preference.to_be_bytes());
            buf.push_name(&wire_name(&mx.exchange))
        }
        RData::SOA(soa) => {
            let mut tail = Vec::with_capacity(20);
            tail.extend_from_slice(&soa.serial.to_be_bytes());
            tail.extend_from_slice(&soa.refresh.to_be_bytes());
            tail.extend_from_slice(&soa.retry.to_be_bytes());
            tail.extend_from_slice(&soa.expire.to_be_bytes());
            tail.extend_from_slice(&soa.minimum.to_be_bytes());
            buf.push_name(&wire_name(&soa.mname));
            buf.push_name(&wire_name(&soa.rname));
            buf.push_bytes(&tail);
        }
        other => {
            let mut v = Vec::new();
            let mut enc = BinEncoder::new(&mut v);
            enc.set_canonical_form(true);
            other
                .emit(&mut enc)
                .map_err(|e| format!("cannot encode type {rtype}: {e}"))?;
            buf.push_bytes(&v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, AAAA, CAA};
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn origin() -> Name {
        Name::from_ascii("example.com.").unwrap()
    }

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    fn parse(text: &str) -> Result<Vec<SourceRecord>, LocatedError> {
        parse_zone_str_old(text, Path::new("/zones/example.com.zone"), &origin())
    }

    fn parse_ok(text: &str) -> Vec<SourceRecord> {
        parse(text).unwrap_or_else(|e| panic!("unexpected error: {e}"))
    }

    fn parse_err(text: &str) -> LocatedError {
        match parse(text) {
            Ok(records) => panic!("expected an error, got {records:#?}"),
            Err(e) => e,
        }
    }

    fn known(record: &SourceRecord) -> &RData {
        match &record.rdata {
            SourceRdata::Known(rdata) => rdata,
            SourceRdata::Raw(raw) => panic!("expected known rdata, got raw {raw:?}"),
        }
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

        let RData::SOA(soa) = known(&records[0]) else {
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

        assert_eq!(known(&records[1]), &RData::NS(NS(name("ns1.example.com."))));
        assert_eq!(records[2].owner, name("ns1.example.com."));
        assert_eq!(
            known(&records[2]),
            &RData::A(A(Ipv4Addr::new(192, 0, 2, 1)))
        );
        assert_eq!(
            known(&records[3]),
            &RData::AAAA(AAAA("2001:db8::1".parse::<Ipv6Addr>().unwrap()))
        );
        assert_eq!(records[3].rtype, 28);
        assert_eq!(
            known(&records[4]),
            &RData::CNAME(CNAME(name("ns1.example.com.")))
        );
        assert_eq!(
            known(&records[5]),
            &RData::MX(MX::new(10, name("mail.example.com.")))
        );
        assert_eq!(
            known(&records[6]),
            &RData::TXT(TXT::from_bytes(vec![b"v=spf1 -all", b"second string"]))
        );
        assert_eq!(records[7].owner, name("_sip._udp.example.com."));
        assert_eq!(
            known(&records[7]),
            &RData::SRV(SRV::new(10, 20, 5060, name("sip.example.com.")))
        );
        let RData::CAA(caa) = known(&records[8]) else {
            panic!()
        };
        assert_eq!(caa.tag, "issue");
        assert_eq!(caa.value, b"letsencrypt.org");
        assert!(matches!(known(&records[8]), RData::CAA(CAA { .. })));
        assert_eq!(records[9].owner, name("1.2.example.com."));
        assert_eq!(
            known(&records[9]),
            &RData::PTR(PTR(name("host.example.com.")))
        );
        assert!(records
            .iter()
            .all(|r| r.file == Path::new("/zones/example.com.zone")));
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
        assert_eq!(known(&records[0]), &RData::NS(NS(name("ns1.example.com."))));
        assert_eq!(
            known(&records[1]),
            &RData::MX(MX::new(10, name("mail.example.com.")))
        );
        assert_eq!(known(&records[2]), &RData::MX(MX::new(20, origin())));
        assert_eq!(known(&records[3]), &RData::CNAME(CNAME(origin())));
        // Owner case is kept as written.
        assert!(records[4].owner.eq_case(&name("Web.Sub.example.com.")));
        assert!(records[4].owner.is_fqdn());
        assert_eq!(
            known(&records[4]),
            &RData::CNAME(CNAME(name("www.example.com.")))
        );
        assert_eq!(
            known(&records[5]),
            &RData::SRV(SRV::new(0, 0, 443, name("web.sub.example.com.")))
        );
        assert_eq!(records[6].owner, name("odd_name.example.com."));
        let RData::CNAME(CNAME(target)) = known(&records[6]) else {
            panic!()
        };
        assert_eq!(target.iter().nth(1).unwrap(), b"0/25");
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
        assert_eq!(records[0].owner, name("a.example.com."));
        assert_eq!(records[1].owner, name("b.sub.example.com."));
        assert_eq!(records[2].owner, name("c.deeper.sub.example.com."));
        assert_eq!(
            known(&records[3]),
            &RData::NS(NS(name("ns.deeper.sub.example.com.")))
        );
        assert_eq!(records[4].owner, name("deeper.sub.example.com."));
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
        let RData::SOA(soa) = known(&records[0]) else {
            panic!()
        };
        assert_eq!(soa.mname, name("ns1.example.com."));
        assert_eq!(soa.rname, name("hostmaster.example.com."));
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
        let RData::SOA(soa) = known(&records[0]) else {
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
        let owners: Vec<String> = records.iter().map(|r| r.owner.to_string()).collect();
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
             $INCLUDE \"hosts.inc\"\n",
        );
        let (records, stamps) = parse_zone_file_old(&main, &origin()).unwrap();
        // The main file, then the include (read twice, stamped twice).
        assert_eq!(stamps.len(), 3);
        assert_eq!(stamps[0].path, main);
        assert!(stamps.iter().all(|s| s.unchanged()));
        let got: Vec<(String, u32, PathBuf, usize)> = records
            .iter()
            .map(|r| (r.owner.to_string(), r.ttl, r.file.clone(), r.line))
            .collect();
        let inc = dir.0.join("hosts.inc");
        assert_eq!(
            got,
            vec![
                ("a.example.com.".into(), 60, main.clone(), 2),
                ("host.lab.example.com.".into(), 120, inc.clone(), 3),
                ("other.elsewhere.example.".into(), 120, inc.clone(), 5),
                // The include's $ORIGIN and $TTL don't leak back.
                ("b.example.com.".into(), 60, main.clone(), 4),
                ("host.example.com.".into(), 120, inc.clone(), 3),
                ("other.elsewhere.example.".into(), 120, inc.clone(), 5),
            ]
        );

        // An error inside the included file names that file and its line.
        dir.write("bad.inc", "$TTL 60\nok A 192.0.2.1\n\nbad A 192.0.2.300\n");
        let main = dir.write("bad.zone", "$TTL 60\n$INCLUDE bad.inc\n");
        let e = parse_zone_file_old(&main, &origin()).unwrap_err();
        assert_eq!(e.file, dir.0.join("bad.inc"));
        assert_eq!(e.line, 4);
        assert!(e.message.starts_with("bad A record: "), "{e}");

        // A missing included file is named with line 0.
        let main = dir.write("missing.zone", "$INCLUDE nope.inc\n");
        let e = parse_zone_file_old(&main, &origin()).unwrap_err();
        assert_eq!((e.file.clone(), e.line), (dir.0.join("nope.inc"), 0));

        // Loops are errors at the $INCLUDE line.
        dir.write("loop1.inc", "$TTL 60\n$INCLUDE loop2.inc\n");
        dir.write("loop2.inc", "\n\n$INCLUDE loop1.inc\n");
        let e = parse_zone_file_old(&dir.0.join("loop1.inc"), &origin()).unwrap_err();
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
        assert!(parse_zone_file_old(&dir.0.join("chain2.inc"), &origin()).is_ok());
        let e = parse_zone_file_old(&dir.0.join("chain1.inc"), &origin()).unwrap_err();
        assert!(e.message.contains("nested"), "{e}");
    }

    #[test]
    fn missing_top_level_file() {
        let path = std::env::temp_dir().join("meridian-zone-parse-does-not-exist.zone");
        let e = parse_zone_file_old(&path, &origin()).unwrap_err();
        assert_eq!((e.file, e.line), (path, 0));
    }

    #[test]
    fn rfc3597_generic_rdata() {
        let records = parse_ok(
            "$TTL 60\n\
             a TYPE65280 \\# 4 0A000001\n\
             b type65280 \\# 0\n\
             c A \\# 4 C000 0201\n\
             d TYPE1 192.0.2.9\n",
        );
        assert_eq!(records[0].rtype, 65280);
        assert_eq!(records[0].rdata, SourceRdata::Raw(vec![10, 0, 0, 1]));
        assert_eq!(records[1].rdata, SourceRdata::Raw(vec![]));
        assert_eq!(records[2].rtype, 1);
        assert_eq!(records[2].rdata, SourceRdata::Raw(vec![192, 0, 2, 1]));
        assert_eq!(
            known(&records[3]),
            &RData::A(A(Ipv4Addr::new(192, 0, 2, 9)))
        );

        let e = parse_err("$TTL 60\n\na TYPE65280 \\# 5 0A000001\n");
        assert_eq!(e.line, 3);
        assert!(e.message.contains("length 5 does not match 4"), "{e}");
        let e = parse_err("$TTL 60\na TYPE65280 \\# 0 00\n");
        assert!(e.message.contains("does not match"), "{e}");
        let e = parse_err("$TTL 60\na TYPE65280 \\# 2 0A0\n");
        assert!(e.message.contains("odd number"), "{e}");
        let e = parse_err("$TTL 60\na TYPE65280 0A000001\n");
        assert_eq!(e.message, "unknown type TYPE65280 needs RFC 3597 \\# form");
        let e = parse_err("$TTL 60\na DNSKEY 256 3 8 AwEAAa==\n");
        assert!(e.message.contains("DNSKEY"), "{e}");
        let e = parse_err("$TTL 60\na LOC 1 2 3\n");
        assert!(e.message.contains("unknown type 'LOC'"), "{e}");
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
        assert_eq!(e.file, Path::new("/zones/example.com.zone"));
        assert_eq!(e.line, 5);
        assert!(e.message.starts_with("bad A record: "), "{e}");
        assert_eq!(
            e.to_string(),
            format!("/zones/example.com.zone:5: {}", e.message)
        );

        let e = parse_err("$TTL 60\nx A 192.0.2.1 192.0.2.2\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("expected 1 field"), "{e}");
    }

    #[test]
    fn class_other_than_in_is_an_error() {
        let e = parse_err("$TTL 60\nversion CH TXT \"x\"\n");
        assert_eq!((e.line, e.message.as_str()), (2, "class CH not supported"));
        let e = parse_err("$TTL 60\nx 60 HS A 192.0.2.1\n");
        assert_eq!(e.message, "class HS not supported");
        // IN in either position, and CLASS1.
        let records =
            parse_ok("a IN 60 A 192.0.2.1\nb 60 IN A 192.0.2.1\nc CLASS1 60 A 192.0.2.1\n");
        assert_eq!(records.len(), 3);
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
             d HINFO \"Intel x86\" \"Linux\"\n",
        );
        assert_eq!(
            known(&records[0]),
            &RData::TXT(TXT::from_bytes(vec![
                b"say \"hi\"",
                b"ABC",
                b"plain",
                b"semi;colon (paren)"
            ]))
        );
        assert_eq!(
            known(&records[1]),
            &RData::TXT(TXT::from_bytes(vec![b"multi\nline"]))
        );
        assert_eq!(known(&records[2]), &RData::TXT(TXT::from_bytes(vec![b""])));
        assert_eq!(records[3].line, 6);
        assert_eq!(records[3].owner.iter().next().unwrap(), b"esc.dot x");
        let RData::HINFO(hinfo) = known(&records[4]) else {
            panic!()
        };
        assert_eq!(&*hinfo.cpu, b"Intel x86");

        let e = parse_err("$TTL 60\na TXT \"unterminated\n\n");
        assert_eq!(
            (e.line, e.message.as_str()),
            (2, "unterminated quoted string")
        );
        let e = parse_err("$TTL 60\na TXT \"\\256\"\n");
        assert!(e.message.contains("above 255"), "{e}");
        let long = "x".repeat(256);
        let e = parse_err(&format!("$TTL 60\na TXT \"{long}\"\n"));
        assert!(e.message.contains("longer than 255"), "{e}");
    }

    #[test]
    fn bad_names() {
        let long_label = "a".repeat(64);
        let e = parse_err(&format!("$TTL 60\n{long_label} A 192.0.2.1\n"));
        assert_eq!(e.line, 2);
        assert!(e.message.contains("longer than 63"), "{e}");

        let long_name = vec!["a".repeat(60); 5].join(".") + ".";
        let e = parse_err(&format!("$TTL 60\n{long_name} A 192.0.2.1\n"));
        assert!(e.message.contains("longer than 255"), "{e}");

        let e = parse_err("$TTL 60\na..b A 192.0.2.1\n");
        assert!(e.message.contains("empty label"), "{e}");
        let e = parse_err("$TTL 60\nwww CNAME bad..target\n");
        assert!(e.message.starts_with("bad CNAME record: "), "{e}");
    }

    #[test]
    fn crlf_and_missing_final_newline() {
        let records = parse_ok("$TTL 60\r\na A 192.0.2.1\r\n  TXT \"x\"\r\nb A 192.0.2.2");
        assert_eq!(records.len(), 3);
        assert_eq!(records[1].owner, name("a.example.com."));
        assert_eq!(records[2].line, 4);
    }
}
