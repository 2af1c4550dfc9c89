//! Matrices of raw encodings and their `.npy` files.
//!
//! Formats with a NumPy dtype read and write as that dtype: `f64` `<f8`, `f32` `<f4`,
//! `f16` `<f2`, and the integers `s8` `|i1`, `u8` `|u1`, `s16` `<i2`, `u16` `<u2`,
//! `s32` `<i4`, `u32` `<u4`. Every other format (bf16, tf32, fp8, fp6, fp4, scales, s4,
//! u4, b1) is an unsigned integer array of raw encodings, one element per `|u1`, `<u2` or
//! `<u4` by storage width (fp4 and fp6 one per byte). Reading also takes any format's raw
//! encodings in any unsigned dtype, and either byte order; a file is read no further than
//! its header says it holds.

use mmac_compiler::format::{Format, FormatKind};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// A row-major matrix of raw encodings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<u64>,
}

impl Matrix {
    pub fn filled(rows: usize, cols: usize, value: u64) -> Matrix {
        Matrix {
            rows,
            cols,
            data: vec![value; rows * cols],
        }
    }
    /// [`Matrix::filled`], or an error saying how much memory it would take where the
    /// system does not give it (a huge D is refused, not an abort).
    pub fn try_filled(rows: usize, cols: usize, value: u64) -> Result<Matrix, String> {
        let mut data = Matrix::try_room(rows, cols)?;
        data.resize(rows * cols, value);
        Ok(Matrix { rows, cols, data })
    }
    /// An empty vector with room for a `rows` x `cols` matrix's elements (to be pushed),
    /// or [`Matrix::try_filled`]'s error where the system does not give it.
    pub fn try_room(rows: usize, cols: usize) -> Result<Vec<u64>, String> {
        let too_big = || {
            let gib = rows as f64 * cols as f64 * 8.0 / (1u64 << 30) as f64;
            format!(
                "a {rows} x {cols} matrix needs {gib:.1} GiB (8 bytes an element), more memory than there is"
            )
        };
        let n = rows.checked_mul(cols).ok_or_else(too_big)?;
        let mut data = Vec::new();
        data.try_reserve_exact(n).map_err(|_| too_big())?;
        Ok(data)
    }
    pub fn at(&self, i: usize, j: usize) -> u64 {
        self.data[i * self.cols + j]
    }
    /// The first element whose encoding has bits above `format`'s storage width, as
    /// (row, column, value): what no file or array of that format may hold.
    pub fn first_unfit(&self, format: &Format) -> Option<(usize, usize, u64)> {
        let mask = format.storage_mask();
        let cols = self.cols.max(1);
        self.data
            .iter()
            .position(|v| v & !mask != 0)
            .map(|idx| (idx / cols, idx % cols, self.data[idx]))
    }
    /// The transpose (so that columns become contiguous rows).
    pub fn transposed(&self) -> Matrix {
        let mut data = vec![0; self.data.len()];
        for i in 0..self.rows {
            for j in 0..self.cols {
                data[j * self.rows + i] = self.data[i * self.cols + j];
            }
        }
        Matrix {
            rows: self.cols,
            cols: self.rows,
            data,
        }
    }
}

/// Why a matrix file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("{path}: not a readable .npy file: {message}")]
    Format { path: PathBuf, message: String },
    #[error(
        "{path}: {operand} must have dtype {want} (`{format}`) or hold raw `{format}` encodings in an unsigned integer dtype, found {found}"
    )]
    Dtype {
        path: PathBuf,
        operand: String,
        format: String,
        want: String,
        found: String,
    },
    #[error(
        "{path}: {operand} holds column positions: an unsigned integer dtype (uint8, uint16, uint32 or uint64), found {found}"
    )]
    PositionsDtype {
        path: PathBuf,
        operand: String,
        found: String,
    },
    #[error("{path}: {operand} must be a 2-D matrix, found shape {found:?}")]
    Rank {
        path: PathBuf,
        operand: String,
        found: Vec<u64>,
    },
    #[error("{path}: element [{row}, {col}] = {value:#x} does not fit `{format}` ({bits} bits)")]
    Encoding {
        path: PathBuf,
        row: usize,
        col: usize,
        value: u64,
        format: String,
        bits: u32,
    },
}

/// The NumPy dtype descriptor of a format's encodings.
pub fn dtype_of(format: &Format) -> &'static str {
    match (format.name.as_str(), &format.kind) {
        ("f64", _) => "<f8",
        ("f32", _) => "<f4",
        ("f16", _) => "<f2",
        (_, FormatKind::Int(i)) if i.bits == 8 && i.signed => "|i1",
        (_, FormatKind::Int(i)) if i.bits == 16 && i.signed => "<i2",
        (_, FormatKind::Int(i)) if i.bits == 32 && i.signed => "<i4",
        (_, FormatKind::Int(i)) if i.bits == 16 => "<u2",
        (_, FormatKind::Int(i)) if i.bits == 32 => "<u4",
        _ => match format.storage_bits() {
            0..=8 => "|u1",
            9..=16 => "<u2",
            17..=32 => "<u4",
            _ => "<u8",
        },
    }
}

fn format_err(path: &Path, e: impl std::fmt::Display) -> MatrixError {
    MatrixError::Format {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// The largest `.npy` header read (NumPy writes a few hundred bytes; version 1 allows
/// 64 KiB).
const MAX_HEADER: usize = 1 << 20;

/// A `.npy` file's bytes, read no further than its header says it holds: the magic, the
/// header, then the shape's elements (and no more: a device such as `/dev/zero` or a file
/// with a huge declared shape is refused, not read until memory runs out). The shape's
/// size is computed here, checked, before any reader sees it.
fn npy_bytes(path: &Path) -> Result<Vec<u8>, MatrixError> {
    use std::io::Read;
    let io = |source| MatrixError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    let mut take = |bytes: &mut Vec<u8>, n: usize| -> Result<bool, MatrixError> {
        let before = bytes.len();
        (&mut file).take(n as u64).read_to_end(bytes).map_err(io)?;
        Ok(bytes.len() - before == n)
    };
    let not_npy = |why: &str| format_err(path, why);
    if !take(&mut bytes, 8)? || !bytes.starts_with(b"\x93NUMPY") {
        return Err(not_npy("no .npy magic (\\x93NUMPY) at its start"));
    }
    let long = bytes[6] >= 2;
    let (at, len_bytes) = (bytes.len(), if long { 4 } else { 2 });
    if !take(&mut bytes, len_bytes)? {
        return Err(not_npy("the file ends inside its header"));
    }
    let mut n = [0u8; 4];
    n[..len_bytes].copy_from_slice(&bytes[at..]);
    let header_len = u32::from_le_bytes(n) as usize;
    if header_len > MAX_HEADER {
        return Err(not_npy(&format!("a header of {header_len} bytes")));
    }
    let header_at = bytes.len();
    if !take(&mut bytes, header_len)? {
        return Err(not_npy("the file ends inside its header"));
    }
    let header = String::from_utf8_lossy(&bytes[header_at..]).into_owned();
    let (shape, item) = header_shape_and_item(&header).map_err(|e| format_err(path, e))?;
    let size = shape
        .iter()
        .try_fold(item as u64, |n, &d| n.checked_mul(d))
        .and_then(|n| usize::try_from(n).ok());
    let shown = shape
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" x ");
    match size {
        Some(size) if take(&mut bytes, size)? => Ok(bytes),
        _ => Err(format_err(
            path,
            format!("shape {shown} needs more data than the file holds"),
        )),
    }
}

/// The shape and item size (bytes) a `.npy` header declares: `'shape': (2, 3)` and the
/// width of a plain `'descr'` (`'<f2'`: 2); a descr that is not one string (a structured
/// dtype) counts 0 bytes (its dtype is refused later).
fn header_shape_and_item(header: &str) -> Result<(Vec<u64>, usize), String> {
    let after = |key: &str| header.find(key).map(|i| &header[i + key.len()..]);
    let shape = after("'shape':")
        .and_then(|s| Some(&s[s.find('(')? + 1..s.find(')')?]))
        .ok_or("no shape in its header")?;
    let shape = shape
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.trim_end_matches('L').parse::<u64>())
        .collect::<Result<Vec<u64>, _>>()
        .map_err(|_| format!("the shape ({shape}) is not a tuple of sizes"))?;
    let item = after("'descr':")
        .map(str::trim_start)
        .and_then(|s| s.strip_prefix('\''))
        .and_then(|s| s.split('\'').next())
        .and_then(|d| d.get(2..))
        .and_then(|w| w.parse().ok())
        .unwrap_or(0);
    Ok((shape, item))
}

/// A plain dtype's kind and width (`<f2`: `f`, 2), either byte order.
fn kind_and_width(dtype: &str) -> Option<(char, usize)> {
    let mut c = dtype.chars();
    let order = c.next()?;
    let kind = c.next()?;
    matches!(order, '<' | '>' | '|' | '=')
        .then(|| c.as_str().parse().ok().map(|w| (kind, w)))
        .flatten()
}

/// Read a 2-D `.npy` matrix holding encodings of `format`: in the format's dtype
/// ([`dtype_of`]), or its raw encodings in any unsigned integer dtype (each checked to fit
/// the format's width); either byte order. `operand` names it in errors.
pub fn read(path: &Path, format: &Format, operand: &str) -> Result<Matrix, MatrixError> {
    let bytes = npy_bytes(path)?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| format_err(path, e))?;
    let want = dtype_of(format);
    let found = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => format!("{other:?}"),
    };
    let kind = kind_and_width(&found).filter(|&(kind, width)| {
        Some((kind, width)) == kind_and_width(want) || kind == 'u' && matches!(width, 1 | 2 | 4 | 8)
    });
    let Some((kind, width)) = kind else {
        // ml_dtypes' arrays (bf16, FP8, ...) are saved by np.save as raw void bytes
        let hint = if found.len() > 1 && found[1..].starts_with('V') {
            let uint = match &found[2..] {
                "1" => "np.uint8",
                "2" => "np.uint16",
                "4" => "np.uint32",
                _ => "an unsigned integer dtype of its width",
            };
            format!(
                " (raw bytes: np.save writes ml_dtypes arrays as void; save `A.view({uint})` instead, the raw encodings)"
            )
        } else {
            String::new()
        };
        return Err(MatrixError::Dtype {
            path: path.to_path_buf(),
            operand: operand.to_string(),
            format: format.name.clone(),
            want: want.to_string(),
            found: found + &hint,
        });
    };
    let shape = npy.shape().to_vec();
    if shape.len() != 2 {
        return Err(MatrixError::Rank {
            path: path.to_path_buf(),
            operand: operand.to_string(),
            found: shape,
        });
    }
    let (rows, cols) = (shape[0] as usize, shape[1] as usize);
    let fortran = npy.order() == npyz::Order::Fortran;
    let fail = |e| format_err(path, e);
    let data: Vec<u64> = match (kind, width) {
        ('f', 8) => npy
            .into_vec::<f64>()
            .map_err(fail)?
            .into_iter()
            .map(f64::to_bits)
            .collect(),
        ('f', 4) => npy
            .into_vec::<f32>()
            .map_err(fail)?
            .into_iter()
            .map(|x| x.to_bits() as u64)
            .collect(),
        ('f', 2) => npy
            .into_vec::<half::f16>()
            .map_err(fail)?
            .into_iter()
            .map(|x| x.to_bits() as u64)
            .collect(),
        ('i', 1) => npy
            .into_vec::<i8>()
            .map_err(fail)?
            .into_iter()
            .map(|x| x as u8 as u64)
            .collect(),
        ('i', 2) => npy
            .into_vec::<i16>()
            .map_err(fail)?
            .into_iter()
            .map(|x| x as u16 as u64)
            .collect(),
        ('i', 4) => npy
            .into_vec::<i32>()
            .map_err(fail)?
            .into_iter()
            .map(|x| x as u32 as u64)
            .collect(),
        ('u', 1) => npy
            .into_vec::<u8>()
            .map_err(fail)?
            .into_iter()
            .map(u64::from)
            .collect(),
        ('u', 2) => npy
            .into_vec::<u16>()
            .map_err(fail)?
            .into_iter()
            .map(u64::from)
            .collect(),
        ('u', 4) => npy
            .into_vec::<u32>()
            .map_err(fail)?
            .into_iter()
            .map(u64::from)
            .collect(),
        _ => npy.into_vec::<u64>().map_err(fail)?,
    };
    if data.len() != rows * cols {
        return Err(format_err(
            path,
            format!("shape {rows} x {cols} but {} elements", data.len()),
        ));
    }
    let m = if fortran {
        Matrix {
            rows: cols,
            cols: rows,
            data,
        }
        .transposed()
    } else {
        Matrix { rows, cols, data }
    };
    if let Some((row, col, value)) = m.first_unfit(format) {
        return Err(MatrixError::Encoding {
            path: path.to_path_buf(),
            row,
            col,
            value,
            format: format.name.clone(),
            bits: format.storage_bits(),
        });
    }
    Ok(m)
}

/// Read a 2-D `.npy` matrix of column positions (a sparse A's `--meta`): any unsigned
/// integer dtype (uint8, uint16, uint32, uint64), in either byte order.
pub fn read_positions(path: &Path, operand: &str) -> Result<Matrix, MatrixError> {
    // (u64 holds every unsigned dtype's values)
    read(path, &Format::int("u64", 64, false), operand).map_err(|e| match e {
        MatrixError::Dtype { found, .. } => MatrixError::PositionsDtype {
            path: path.to_path_buf(),
            operand: operand.to_string(),
            found,
        },
        other => other,
    })
}

/// Write a matrix of `format` encodings as a 2-D `.npy` file of its dtype, atomically
/// (see [`Output`]).
pub fn write(path: &Path, format: &Format, m: &Matrix) -> Result<(), MatrixError> {
    Ok(Output::create(path)?.finish(format, m)?)
}

pub use crate::output::{Output, OutputError};

impl Output {
    /// Write the matrix as a `.npy` file and put it in place ([`Output::write_with`]).
    pub fn finish(self, format: &Format, m: &Matrix) -> Result<(), OutputError> {
        self.expecting(npy_size(format, m.rows, m.cols))
            .write_with(|out| write_npy(out, format, m))
    }
}

/// Elements converted per parallel chunk when writing a `.npy` file.
const WRITE_CHUNK: usize = 1 << 15;

/// The `.npy` bytes of a matrix of `format` encodings, in its dtype: the header
/// ([`write_npy_header`]), then the elements ([`write_npy_elements`]).
fn write_npy(
    out: &mut (impl std::io::Write + ?Sized),
    format: &Format,
    m: &Matrix,
) -> std::io::Result<()> {
    write_npy_header(out, format, m.rows, m.cols)?;
    write_elements(out, format, &m.data, true)
}

/// About the size of a `.npy` file of a `rows` x `cols` matrix of `format` encodings: its
/// elements and a header of 128 bytes (npyz pads the header to a multiple of 64; a longer
/// one makes this an underestimate, which [`Output::expecting`] allows).
pub fn npy_size(format: &Format, rows: usize, cols: usize) -> u64 {
    let width: u64 = dtype_of(format)[2..].parse().unwrap_or(8);
    128 + (rows as u64)
        .saturating_mul(cols as u64)
        .saturating_mul(width)
}

/// The header of a `.npy` file of a `rows` x `cols` matrix of `format` encodings (by
/// npyz); [`write_npy_elements`] writes what follows, in one call or row by row.
pub fn write_npy_header(
    out: &mut (impl std::io::Write + ?Sized),
    format: &Format,
    rows: usize,
    cols: usize,
) -> std::io::Result<()> {
    use npyz::WriterBuilder;
    let dtype = npyz::DType::Plain(
        dtype_of(format)
            .parse()
            .map_err(|e| std::io::Error::other(format!("{e}")))?,
    );
    npyz::WriteOptions::new_header_only()
        .dtype(dtype)
        .shape(&[rows as u64, cols as u64])
        .writer(&mut *out)
        .write_header_only()?;
    Ok(())
}

/// Elements of a `.npy` file of `format` encodings, row-major, after its header: each
/// as the little-endian bytes of the format's dtype (every dtype here has one byte
/// order), converted on this thread (it may run beside a computation's workers) a
/// chunk at a time.
pub fn write_npy_elements(
    out: &mut (impl std::io::Write + ?Sized),
    format: &Format,
    data: &[u64],
) -> std::io::Result<()> {
    write_elements(out, format, data, false)
}

/// [`write_npy_elements`], converting chunks in parallel on rayon's pool when `parallel`.
fn write_elements(
    out: &mut (impl std::io::Write + ?Sized),
    format: &Format,
    data: &[u64],
    parallel: bool,
) -> std::io::Result<()> {
    // the dtype's width: the digits after the kind ("<f4": 4, "|u1": 1)
    let width: usize = dtype_of(format)[2..].parse().unwrap_or(8);
    // an encoding's low `width` bytes are the element (signed dtypes hold the two's
    // complement pattern, floats their bits); one loop per width, so that each copy is
    // a store of that width
    fn low_bytes<const W: usize>(to: &mut [u8], from: &[u64]) {
        for (t, &v) in to.chunks_exact_mut(W).zip(from) {
            let b: [u8; 8] = v.to_le_bytes();
            t.copy_from_slice(&b[..W]);
        }
    }
    let convert: fn(&mut [u8], &[u64]) = match width {
        1 => low_bytes::<1>,
        2 => low_bytes::<2>,
        4 => low_bytes::<4>,
        _ => low_bytes::<8>,
    };
    // a few chunks per worker at a time, through one buffer (a buffer of the whole
    // file would cost a page fault per page of it)
    let batch = match parallel {
        true => WRITE_CHUNK * 2 * rayon::current_num_threads().max(1),
        false => WRITE_CHUNK,
    };
    let mut bytes = vec![0u8; batch.min(data.len()) * width];
    for from in data.chunks(batch) {
        let to = &mut bytes[..from.len() * width];
        if parallel {
            to.par_chunks_mut(WRITE_CHUNK * width)
                .zip(from.par_chunks(WRITE_CHUNK))
                .for_each(|(to, from)| convert(to, from));
        } else {
            convert(to, from);
        }
        out.write_all(to)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmac_compiler::format::builtin;

    #[test]
    fn round_trip_every_dtype() {
        let dir = tempfile::TempDir::new().unwrap();
        for name in [
            "f64", "f32", "f16", "bf16", "tf32", "e4m3", "e2m1", "ue8m0", "s8", "u8", "s32", "s4",
            "b1",
        ] {
            let f = builtin(name).unwrap();
            let mask = f.storage_mask();
            let m = Matrix {
                rows: 2,
                cols: 3,
                data: (0..6u64)
                    .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask)
                    .collect(),
            };
            let p = dir.path().join(format!("round-trip-{name}.npy"));
            write(&p, &f, &m).unwrap();
            assert_eq!(read(&p, &f, "a").unwrap(), m, "{name}");
        }
    }

    /// The `.npy` file `write` made for `m`, rewritten big-endian: the header's byte-order
    /// character flipped and each element's bytes reversed.
    fn big_endian(little: &[u8], width: usize) -> Vec<u8> {
        let header = 10 + u16::from_le_bytes([little[8], little[9]]) as usize;
        // the magic string and the header's length, then its text
        let text = std::str::from_utf8(&little[10..header]).unwrap();
        assert!(text.contains("'<"), "a little-endian dtype: {text}");
        let mut out = little[..10].to_vec();
        out.extend(text.replacen("'<", "'>", 1).bytes());
        for element in little[header..].chunks(width) {
            out.extend(element.iter().rev());
        }
        out
    }

    #[test]
    fn a_big_endian_file_reads_as_its_little_endian_twin() {
        let dir = tempfile::TempDir::new().unwrap();
        for (name, width) in [
            ("f64", 8),
            ("f32", 4),
            ("f16", 2),
            ("bf16", 2),
            ("tf32", 4),
            ("s32", 4),
        ] {
            let f = builtin(name).unwrap();
            let m = Matrix {
                rows: 2,
                cols: 3,
                data: (1..7u64)
                    .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & f.storage_mask())
                    .collect(),
            };
            let p = dir.path().join(format!("{name}.npy"));
            write(&p, &f, &m).unwrap();
            let big = big_endian(&std::fs::read(&p).unwrap(), width);
            std::fs::write(&p, big).unwrap();
            assert_eq!(read(&p, &f, "a").unwrap(), m, "{name}");
        }
        // a sparse A's positions, in every unsigned width
        for (bits, width) in [(16, 2), (32, 4), (64, 8)] {
            let f = Format::int(&format!("u{bits}"), bits, false);
            let m = Matrix {
                rows: 2,
                cols: 2,
                data: vec![1, 3, 0x102, 7],
            };
            let p = dir.path().join(format!("positions-u{bits}.npy"));
            write(&p, &f, &m).unwrap();
            let big = big_endian(&std::fs::read(&p).unwrap(), width);
            std::fs::write(&p, big).unwrap();
            assert_eq!(read_positions(&p, "--meta").unwrap(), m, "u{bits}");
        }
    }

    #[test]
    fn wrong_dtype_names_what_was_expected() {
        let dir = tempfile::TempDir::new().unwrap();
        let p = dir.path().join("wrong-dtype-f32.npy");
        write(&p, &builtin("f32").unwrap(), &Matrix::filled(2, 2, 0)).unwrap();
        let e = read(&p, &builtin("f16").unwrap(), "a")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a must have dtype <f2 (`f16`) or hold raw `f16` encodings in an unsigned integer dtype, found <f4"),
            "{e}"
        );
    }

    /// Raw encodings in any unsigned dtype read as the format's own dtype does (uint16
    /// for f16, uint8 for s8, uint64 for f32, uint16 for e2m1), each checked to fit.
    #[test]
    fn raw_encodings_in_any_unsigned_dtype() {
        let dir = tempfile::TempDir::new().unwrap();
        for (name, container) in [
            ("f16", "u16"),
            ("s8", "u8"),
            ("f32", "u64"),
            ("e2m1", "u16"),
        ] {
            let f = builtin(name).unwrap();
            let bits = container[1..].parse().unwrap();
            let m = Matrix {
                rows: 2,
                cols: 3,
                data: (1..7u64)
                    .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & f.storage_mask())
                    .collect(),
            };
            let p = dir.path().join(format!("{name}-as-{container}.npy"));
            write(&p, &Format::int(container, bits, false), &m).unwrap();
            assert_eq!(read(&p, &f, "a").unwrap(), m, "{name} in {container}");
        }
        let p = dir.path().join("wide.npy");
        let wide = Matrix {
            rows: 1,
            cols: 2,
            data: vec![3, 0x1_0000],
        };
        write(&p, &Format::int("u32", 32, false), &wide).unwrap();
        let e = read(&p, &builtin("f16").unwrap(), "a")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("element [0, 1] = 0x10000 does not fit `f16`"),
            "{e}"
        );
    }

    /// The header is read first: a shape whose size overflows, or more than the file
    /// holds, is refused before any element is read (a device such as `/dev/zero` is
    /// never read to its end), and bytes past the elements are left unread.
    #[test]
    fn a_file_is_read_no_further_than_its_header_says() {
        let dir = tempfile::TempDir::new().unwrap();
        let f16 = builtin("f16").unwrap();
        let header = |shape: &str| {
            let text = format!("{{'descr': '<f2', 'fortran_order': False, 'shape': {shape}, }}");
            let mut out = b"\x93NUMPY\x01\x00".to_vec();
            out.extend((text.len() as u16 + 1).to_le_bytes());
            out.extend(text.bytes());
            out.push(b'\n');
            out
        };
        for (shape, says) in [
            (
                "(4294967296, 4294967296)",
                "shape 4294967296 x 4294967296 needs more data",
            ),
            (
                "(18446744073709551615, 2)",
                "needs more data than the file holds",
            ),
            ("(3, 3)", "shape 3 x 3 needs more data"),
            ("(3 3)", "the shape (3 3) is not a tuple of sizes"),
        ] {
            let p = dir.path().join("bad.npy");
            let mut bytes = header(shape);
            bytes.extend([0u8; 6]);
            std::fs::write(&p, bytes).unwrap();
            let e = read(&p, &f16, "a").unwrap_err().to_string();
            assert!(e.contains(says), "{shape}: {e}");
        }
        let p = dir.path().join("trailing.npy");
        let mut bytes = header("(1, 2)");
        bytes.extend([0x00, 0x3c, 0x00, 0xc0, 0xff, 0xff, 0xff]);
        std::fs::write(&p, bytes).unwrap();
        assert_eq!(read(&p, &f16, "a").unwrap().data, vec![0x3c00, 0xc000]);
        #[cfg(unix)]
        for device in ["/dev/zero", "/dev/urandom"] {
            let e = read(Path::new(device), &f16, "a").unwrap_err().to_string();
            assert!(e.contains("no .npy magic"), "{device}: {e}");
        }
    }

    #[test]
    fn first_unfit_finds_the_first_wide_encoding() {
        let e2m1 = builtin("e2m1").unwrap();
        let m = Matrix {
            rows: 2,
            cols: 3,
            data: vec![0, 0xf, 3, 7, 0x10, 0x20],
        };
        assert_eq!(m.first_unfit(&e2m1), Some((1, 1, 0x10)));
        assert_eq!(m.first_unfit(&builtin("u8").unwrap()), None);
        // tf32 keeps 32 bits of storage, its 13 ignored low bits included
        let tf32 = Matrix {
            rows: 1,
            cols: 2,
            data: vec![0xffff_ffff, 0x1_0000_0000],
        };
        assert_eq!(
            tf32.first_unfit(&builtin("tf32").unwrap()),
            Some((0, 1, 0x1_0000_0000))
        );
    }

    #[test]
    fn out_of_range_encodings_are_refused() {
        let dir = tempfile::TempDir::new().unwrap();
        let p = dir.path().join("out-of-range-u1.npy");
        write(
            &p,
            &builtin("u8").unwrap(),
            &Matrix {
                rows: 1,
                cols: 2,
                data: vec![3, 0x1f],
            },
        )
        .unwrap();
        let e = read(&p, &builtin("e2m1").unwrap(), "b")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("element [0, 1] = 0x1f does not fit `e2m1` (4 bits)"),
            "{e}"
        );
    }
}
