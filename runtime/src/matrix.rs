//! Matrices of raw encodings and their `.npy` files.
//!
//! Formats with a NumPy dtype read and write as that dtype: `f64` `<f8`, `f32` `<f4`,
//! `f16` `<f2`, and the integers `s8` `|i1`, `u8` `|u1`, `s16` `<i2`, `u16` `<u2`,
//! `s32` `<i4`, `u32` `<u4`. Every other format (bf16, tf32, fp8, fp6, fp4, scales, s4,
//! u4, b1) is an unsigned integer array of raw encodings, one element per `|u1`, `<u2` or
//! `<u4` by storage width (fp4 and fp6 one per byte).

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
        "{path}: {operand} must have dtype {want} (the raw encoding of `{format}`), found {found}"
    )]
    Dtype {
        path: PathBuf,
        operand: String,
        format: String,
        want: String,
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

/// Read a 2-D `.npy` matrix holding encodings of `format`. `operand` names it in errors.
pub fn read(path: &Path, format: &Format, operand: &str) -> Result<Matrix, MatrixError> {
    let bytes = std::fs::read(path).map_err(|source| MatrixError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| format_err(path, e))?;
    let want = dtype_of(format);
    let found = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => format!("{other:?}"),
    };
    // the same kind and width in either byte order (npyz reads both), and a one-byte
    // dtype with any byte-order character
    let same = found == want
        || (want.len() == 3
            && found.len() == 3
            && found[1..] == want[1..]
            && (want.ends_with('1') || found.starts_with('>')));
    if !same {
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
    }
    let shape = npy.shape().to_vec();
    if shape.len() != 2 {
        return Err(MatrixError::Rank {
            path: path.to_path_buf(),
            operand: operand.to_string(),
            found: shape,
        });
    }
    let (rows, cols) = (shape[0] as usize, shape[1] as usize);
    // a header that promises more elements than the file holds is refused before reading
    let item = want[2..].parse::<usize>().unwrap_or(8);
    if rows
        .checked_mul(cols)
        .and_then(|n| n.checked_mul(item))
        .is_none_or(|n| n > bytes.len())
    {
        return Err(format_err(
            path,
            format!("shape {rows} x {cols} needs more data than the file holds"),
        ));
    }
    let fortran = npy.order() == npyz::Order::Fortran;
    let data: Vec<u64> = match want {
        "<f8" => npy
            .into_vec::<f64>()
            .map_err(|e| format_err(path, e))?
            .into_iter()
            .map(f64::to_bits)
            .collect(),
        "<f4" => npy
            .into_vec::<f32>()
            .map_err(|e| format_err(path, e))?
            .into_iter()
            .map(|x| x.to_bits() as u64)
            .collect(),
        "<f2" => npy
            .into_vec::<half::f16>()
            .map_err(|e| format_err(path, e))?
            .into_iter()
            .map(|x| x.to_bits() as u64)
            .collect(),
        "|i1" => npy
            .into_vec::<i8>()
            .map_err(|e| format_err(path, e))?
            .into_iter()
            .map(|x| x as u8 as u64)
            .collect(),
        "<i2" => npy
            .into_vec::<i16>()
            .map_err(|e| format_err(path, e))?
            .into_iter()
            .map(|x| x as u16 as u64)
            .collect(),
        "<i4" => npy
            .into_vec::<i32>()
            .map_err(|e| format_err(path, e))?
            .into_iter()
            .map(|x| x as u32 as u64)
            .collect(),
        "|u1" => npy
            .into_vec::<u8>()
            .map_err(|e| format_err(path, e))?
            .into_iter()
            .map(u64::from)
            .collect(),
        "<u2" => npy
            .into_vec::<u16>()
            .map_err(|e| format_err(path, e))?
            .into_iter()
            .map(u64::from)
            .collect(),
        "<u4" => npy
            .into_vec::<u32>()
            .map_err(|e| format_err(path, e))?
            .into_iter()
            .map(u64::from)
            .collect(),
        _ => npy.into_vec::<u64>().map_err(|e| format_err(path, e))?,
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
    let mut found = String::new();
    for bits in [8, 16, 32, 64] {
        match read(
            path,
            &Format::int(&format!("u{bits}"), bits, false),
            operand,
        ) {
            Err(MatrixError::Dtype { found: f, .. }) => found = f,
            other => return other,
        }
    }
    Err(MatrixError::Dtype {
        path: path.to_path_buf(),
        operand: operand.to_string(),
        format: "column positions".into(),
        want: "uint8, uint16, uint32 or uint64".into(),
        found,
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
        self.write_with(|out| write_npy(out, format, m))
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
            e.contains("a must have dtype <f2 (the raw encoding of `f16`), found <f4"),
            "{e}"
        );
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
