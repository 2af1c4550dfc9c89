//! Conformance vector files (`.mmv`): reading the header and the cases, with errors that
//! name file, line and column. Data lines are tokenised with logos.
//!
//! ```text
//! # arch: hopper
//! # instruction: mma.m16n8k16.f32.f16.f16.f32
//! # nan: exact
//! c=<hex> a=<hex>,<hex>,... b=<hex>,... [sa=<hex>,... sb=<hex>,...] [pos=<hex>,...] d=<hex>
//! ```
//!
//! `pos=` is for a sparse instruction: the columns (of K, in hex) at which a's stored
//! elements sit, one per element of `a=`, which then holds only the stored elements.

use logos::Logos;
use std::path::{Path, PathBuf};

/// One dot-product-add case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// 1-based line in the file.
    pub line: usize,
    pub c: u64,
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    pub sa: Vec<u64>,
    pub sb: Vec<u64>,
    /// A sparse instruction's positions of a's stored elements (empty for a dense one).
    pub positions: Vec<u64>,
    pub d: u64,
}

/// A parsed vector file.
#[derive(Clone, Debug, Default)]
pub struct VectorFile {
    pub path: PathBuf,
    pub arch: Option<String>,
    pub instruction: Option<String>,
    /// `# nan: any`: any NaN matches any NaN.
    pub nan_any: bool,
    /// The header lines that describe the instruction's operands (`# k:`, `# sparse:`,
    /// `# types:`, `# scale:`): (line, key, value), a value without its parenthesised
    /// note. They do not change how the cases run; `mmac test` warns where they
    /// contradict the instruction.
    pub described: Vec<(usize, String, String)>,
    pub cases: Vec<Case>,
}

/// A malformed line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}:{column}: {message}")]
pub struct VectorError {
    pub path: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

#[derive(Logos, Debug, Clone, Copy, PartialEq, Eq)]
#[logos(skip r"[ \t\r]+")]
enum Token {
    #[token("c=")]
    C,
    #[token("a=")]
    A,
    #[token("b=")]
    B,
    #[token("sa=")]
    Sa,
    #[token("sb=")]
    Sb,
    #[token("pos=")]
    Pos,
    #[token("d=")]
    D,
    #[token(",")]
    Comma,
    #[regex(r"[0-9a-fA-F]+")]
    Hex,
}

/// Read and parse a vector file. Malformed data lines are returned as errors beside the
/// cases that did parse, so one bad line does not hide the rest of the file. So are bytes
/// that are not UTF-8 (an error at the first, the rest of the file read with each such
/// sequence replaced, so that its lines still parse or fail on their own).
pub fn read(path: &Path) -> Result<(VectorFile, Vec<VectorError>), std::io::Error> {
    let bytes = std::fs::read(path)?;
    let invalid = match std::str::from_utf8(&bytes) {
        Ok(text) => return Ok(parse(path, text)),
        Err(e) => e.valid_up_to(),
    };
    let before = &bytes[..invalid];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let (file, mut errors) = parse(path, &String::from_utf8_lossy(&bytes));
    errors.insert(
        0,
        VectorError {
            path: path.display().to_string(),
            line: 1 + before.iter().filter(|&&b| b == b'\n').count(),
            column: 1 + String::from_utf8_lossy(&before[line_start..])
                .chars()
                .count(),
            message: format!(
                "byte 0x{:02x} is not UTF-8 (a vector file is text)",
                bytes[invalid]
            ),
        },
    );
    Ok((file, errors))
}

/// Parse vector-file text.
pub fn parse(path: &Path, text: &str) -> (VectorFile, Vec<VectorError>) {
    let mut file = VectorFile {
        path: path.to_path_buf(),
        ..Default::default()
    };
    let mut errors = vec![];
    let shown = path.display().to_string();
    // a data line (a case, well formed or not) has been read
    let mut data_seen = false;
    // (a byte-order mark, as some editors write, is no part of the first line)
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(header) = trimmed.strip_prefix('#') {
            let column = line.find('#').map_or(1, |i| i + 1);
            let mut error = |message: String| {
                errors.push(VectorError {
                    path: shown.clone(),
                    line: lineno,
                    column,
                    message,
                })
            };
            if let Some(version) = header.trim().strip_prefix("mmv ") {
                if version.trim() != "1" {
                    error(format!(
                        "`# mmv {}`: this mmac reads version 1 of the format",
                        version.trim()
                    ));
                }
                continue;
            }
            if let Some((key, value)) = header.split_once(':') {
                let value = value.trim().to_string();
                let key = key.trim();
                let slot = match key {
                    "arch" => Some(&mut file.arch),
                    "instruction" => Some(&mut file.instruction),
                    "nan" => {
                        if !matches!(value.as_str(), "any" | "exact") {
                            error(format!("`# nan: {value}`: expected `any` or `exact`"));
                        }
                        file.nan_any = value == "any";
                        None
                    }
                    "k" | "sparse" | "types" | "scale" if !data_seen => {
                        let value = value.split(" (").next().unwrap_or_default();
                        file.described
                            .push((lineno, key.to_string(), value.trim().to_string()));
                        None
                    }
                    _ => None,
                };
                // the header names one arch and one instruction, before every case: a
                // later or second one would silently re-label the cases above it
                if let Some(slot) = slot {
                    if data_seen {
                        error(format!(
                            "`# {key}:` after the first case; the header comes first"
                        ));
                    } else if let Some(old) = slot.as_ref().filter(|old| **old != value) {
                        error(format!(
                            "a second `# {key}:` header (`{value}`, after `{old}`); a file holds one {key}"
                        ));
                    } else {
                        *slot = Some(value);
                    }
                }
            }
            continue;
        }
        data_seen = true;
        match parse_case(line, lineno) {
            Ok(c) => file.cases.push(c),
            Err((column, message)) => errors.push(VectorError {
                path: shown.clone(),
                line: lineno,
                column,
                message,
            }),
        }
    }
    (file, errors)
}

fn parse_case(line: &str, lineno: usize) -> Result<Case, (usize, String)> {
    let [c, a, b, sa, sb, positions, d] = parse_fields(line)?;
    Ok(Case {
        line: lineno,
        c: single(c, "c")?,
        a: a.ok_or((1, "missing `a=`".to_string()))?,
        b: b.ok_or((1, "missing `b=`".to_string()))?,
        sa: sa.unwrap_or_default(),
        sb: sb.unwrap_or_default(),
        positions: positions.unwrap_or_default(),
        d: single(d, "d")?,
    })
}

/// One request of the black-box protocol (`mmac serve`, `mmac infer`): a case without
/// its `d=` field, `c=HEX a=HEX,... b=HEX,... [sa=HEX,... sb=HEX,...] [pos=HEX,...]`.
/// Errors carry the 1-based column and a message.
pub fn parse_request(line: &str) -> Result<Request, (usize, String)> {
    let [c, a, b, sa, sb, positions, d] = parse_fields(line)?;
    if d.is_some() {
        let column = line.find("d=").map_or(1, |i| i + 1);
        return Err((column, "a request has no `d=` (the box answers it)".into()));
    }
    Ok(Request {
        c: single(c, "c")?,
        a: a.ok_or((1, "missing `a=`".to_string()))?,
        b: b.ok_or((1, "missing `b=`".to_string()))?,
        sa: sa.unwrap_or_default(),
        sb: sb.unwrap_or_default(),
        positions: positions.unwrap_or_default(),
    })
}

/// One answer of the black-box protocol: `d=HEX` and nothing else.
pub fn parse_answer(line: &str) -> Result<u64, (usize, String)> {
    let [c, a, b, sa, sb, positions, d] = parse_fields(line)?;
    if [c, a, b, sa, sb, positions].iter().any(Option::is_some) {
        return Err((1, "an answer is one `d=HEX` field".into()));
    }
    single(d, "d")
}

/// The operands of one request of the black-box protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub c: u64,
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    pub sa: Vec<u64>,
    pub sb: Vec<u64>,
    /// A sparse instruction's positions of a's stored elements (empty for a dense one).
    pub positions: Vec<u64>,
}

fn single(v: Option<Vec<u64>>, n: &str) -> Result<u64, (usize, String)> {
    match v {
        None => Err((1, format!("missing `{n}=`"))),
        Some(v) if v.len() == 1 => Ok(v[0]),
        Some(_) => Err((1, format!("`{n}=` takes one value"))),
    }
}

type Fields = [Option<Vec<u64>>; 7];

/// The `name=HEX,...` fields of a line, in the order c, a, b, sa, sb, pos, d.
fn parse_fields(line: &str) -> Result<Fields, (usize, String)> {
    let mut lex = Token::lexer(line);
    let mut fields: Fields = Default::default();
    let names = ["c", "a", "b", "sa", "sb", "pos", "d"];
    let mut current: Option<usize> = None;
    let mut expect_value = false;
    while let Some(tok) = lex.next() {
        let col = lex.span().start + 1;
        // (a control character shown escaped: a NUL would end the message on a terminal)
        let tok = tok.map_err(|_| (col, format!("unexpected `{}`", lex.slice().escape_debug())))?;
        match tok {
            Token::C | Token::A | Token::B | Token::Sa | Token::Sb | Token::Pos | Token::D => {
                if expect_value {
                    return Err((col, "expected a hex value".into()));
                }
                let idx = match tok {
                    Token::C => 0,
                    Token::A => 1,
                    Token::B => 2,
                    Token::Sa => 3,
                    Token::Sb => 4,
                    Token::Pos => 5,
                    _ => 6,
                };
                if fields[idx].is_some() {
                    return Err((col, format!("`{}=` given twice", names[idx])));
                }
                fields[idx] = Some(vec![]);
                current = Some(idx);
                expect_value = true;
            }
            Token::Hex => {
                let Some(idx) = current else {
                    return Err((col, "a value before any `name=`".into()));
                };
                if !expect_value {
                    return Err((col, "expected `,` or a new field".into()));
                }
                let s = lex.slice();
                let v = u64::from_str_radix(s, 16).map_err(|_| {
                    // (a long value shown by its start)
                    let shown: String = s.chars().take(24).collect();
                    let more = if s.len() > 24 { "..." } else { "" };
                    (
                        col,
                        format!("`{shown}{more}` ({} digits) is wider than 64 bits", s.len()),
                    )
                })?;
                fields[idx].as_mut().unwrap().push(v);
                expect_value = false;
            }
            Token::Comma => {
                if expect_value || current.is_none() {
                    return Err((col, "unexpected `,`".into()));
                }
                expect_value = true;
            }
        }
    }
    if expect_value {
        return Err((
            line.trim_end().len() + 1,
            "line ends where a hex value was expected".into(),
        ));
    }
    Ok(fields)
}

/// Every `.mmv` file under a path (the path itself if it is a file), sorted.
pub fn find_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = if path.is_file() {
        vec![path.to_path_buf()]
    } else {
        files_with_extension(path, "mmv")?
    };
    out.sort();
    Ok(out)
}

/// Every file below `dir` whose extension is `ext`, following symbolic links (walkdir).
/// A link that leads back to one of its own ancestors is an error naming both; any other
/// error names the path it happened at.
pub(crate) fn files_with_extension(dir: &Path, ext: &str) -> std::io::Result<Vec<PathBuf>> {
    let mut out = vec![];
    for entry in walkdir::WalkDir::new(dir).follow_links(true) {
        let entry = entry.map_err(|e| {
            let at = e.path().unwrap_or(dir).display().to_string();
            match e.loop_ancestor() {
                Some(ancestor) => std::io::Error::other(format!(
                    "symbolic link loop: {at} leads back to {}",
                    ancestor.display()
                )),
                None => {
                    let kind = e.io_error().map_or(std::io::ErrorKind::Other, |e| e.kind());
                    std::io::Error::new(kind, format!("{at}: {e}"))
                }
            }
        })?;
        if entry.file_type().is_file() && entry.path().extension().is_some_and(|e| e == ext) {
            out.push(entry.into_path());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cases_and_headers() {
        let text = "# arch: hopper\n# instruction: x\n# nan: any\nc=3f800000 a=1,2 b=3,4 d=0\n\nc=0 a=1 b=2 sa=7f sb=80 d=ff\n";
        let (f, errs) = parse(Path::new("t.mmv"), text);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(f.arch.as_deref(), Some("hopper"));
        assert!(f.nan_any);
        assert_eq!(f.cases.len(), 2);
        assert_eq!(f.cases[0].a, vec![1, 2]);
        assert_eq!(f.cases[1].sa, vec![0x7f]);
        assert_eq!(f.cases[1].line, 6);
    }

    #[test]
    fn reports_line_and_column() {
        let (_, errs) = parse(
            Path::new("t.mmv"),
            "c=0 a=1,,2 b=3 d=0\nc=0 a=1 b=zz d=0\nc=0 a=1 b=2\n",
        );
        assert_eq!(errs.len(), 3);
        assert_eq!((errs[0].line, errs[0].column), (1, 9));
        assert_eq!((errs[1].line, errs[1].column), (2, 11));
        assert!(errs[2].message.contains("missing `d=`"));
        assert_eq!(errs[0].to_string(), "t.mmv:1:9: unexpected `,`");
        // a NUL is shown escaped, a 100k-digit value by its start, a BOM is no token
        let long = "f".repeat(100_000);
        let text = format!("\u{feff}c=0 a=1 b=\0 d=0\nc=0 a={long} b=1 d=0\n");
        let (_, errs) = parse(Path::new("t.mmv"), &text);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0].to_string(), "t.mmv:1:11: unexpected `\\0`");
        assert_eq!(
            errs[1].to_string(),
            format!(
                "t.mmv:2:7: `{}...` (100000 digits) is wider than 64 bits",
                &long[..24]
            )
        );
    }
}

#[cfg(all(test, unix))]
mod walk_tests {
    use super::*;

    #[test]
    fn a_symlink_loop_is_a_clear_error() {
        let dir = tempfile::TempDir::new().unwrap();
        let sub = dir.path().join("hopper");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("x.mmv"), "# arch: hopper\n").unwrap();
        std::os::unix::fs::symlink("..", sub.join("up")).unwrap();
        let e = find_files(dir.path()).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "symbolic link loop: {} leads back to {}",
                sub.join("up").display(),
                dir.path().display()
            )
        );
    }

    #[test]
    fn links_that_do_not_loop_are_followed() {
        let dir = tempfile::TempDir::new().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("x.mmv"), "").unwrap();
        std::fs::write(real.join("notes.txt"), "").unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("linked")).unwrap();
        let found = find_files(dir.path()).unwrap();
        assert_eq!(
            found,
            [
                dir.path().join("linked/x.mmv"),
                dir.path().join("real/x.mmv")
            ]
        );
    }
}

#[cfg(test)]
mod protocol_tests {
    use super::*;

    #[test]
    fn requests_and_answers() {
        let r = parse_request("c=3f800000 a=3c00,0 b=3c00,0 sa=7f sb=80").unwrap();
        assert_eq!((r.c, r.a, r.sb), (0x3f80_0000, vec![0x3c00, 0], vec![0x80]));
        assert_eq!(parse_answer(" d=3f800002 ").unwrap(), 0x3f80_0002);
        for (bad, column) in [
            ("c=0 a=0 b=0 d=0", 13),
            ("c=0 a=0,", 9),
            ("c=0 a=0 b=0x1", 12),
        ] {
            assert_eq!(parse_request(bad).unwrap_err().0, column, "{bad}");
        }
        assert!(parse_request("a=0 b=0").is_err());
        assert!(parse_answer("c=0 d=0").is_err());
        assert!(parse_answer("").is_err());
    }
}
