"""Operands between NumPy (and torch) and raw encodings.

Every operand reaches the native module as a matrix of raw encodings (one ``uint64`` per
element). This module decides how an array becomes encodings and how D comes back:

- an array whose dtype holds the operand's format bit for bit (``float16``, ``float32``,
  ``float64``, the ``ml_dtypes`` types, the integer dtypes) is reinterpreted, never
  converted;
- an unsigned integer array holds raw encodings (accepted for every format, and the only
  way to pass formats that no dtype holds: tf32, ue4m3, s4/u4 raw codes, b1);
- Python numbers and lists of them (anything that is not already an array or a tensor)
  are encoded exactly: a value the format does not hold is a ``ValueError``;
- any other dtype is a ``ValueError`` naming what was expected: a dtype of another
  format (``float8_e4m3fn`` for CDNA3's FNUZ fp8) is never reinterpreted silently.

A format is matched to a dtype by its layout (exponent and mantissa widths, bias,
specials, sign, subnormals), so formats defined in a spec match too.
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

# (exponent, mantissa, bias, specials, signed, subnormals) -> ml_dtypes/NumPy type name
_FLOAT_LAYOUTS = {
    (11, 52, 1023, "ieee", True, True): "float64",
    (8, 23, 127, "ieee", True, True): "float32",
    (5, 10, 15, "ieee", True, True): "float16",
    (8, 7, 127, "ieee", True, True): "bfloat16",
    (4, 3, 7, "fn", True, True): "float8_e4m3fn",
    (5, 2, 15, "ieee", True, True): "float8_e5m2",
    (4, 3, 8, "fnuz", True, True): "float8_e4m3fnuz",
    (5, 2, 16, "fnuz", True, True): "float8_e5m2fnuz",
    (4, 3, 11, "fnuz", True, True): "float8_e4m3b11fnuz",
    (4, 3, 7, "ieee", True, True): "float8_e4m3",
    (3, 4, 3, "ieee", True, True): "float8_e3m4",
    (2, 3, 1, "none", True, True): "float6_e2m3fn",
    (3, 2, 3, "none", True, True): "float6_e3m2fn",
    (2, 1, 1, "none", True, True): "float4_e2m1fn",
    (8, 0, 127, "fn", False, False): "float8_e8m0fnu",
}

# (bits, signed) -> dtype name
_INT_LAYOUTS = {
    (1, False): "bool",
    (4, True): "int4",
    (4, False): "uint4",
    (8, True): "int8",
    (8, False): "uint8",
    (16, True): "int16",
    (16, False): "uint16",
    (32, True): "int32",
    (32, False): "uint32",
    (64, True): "int64",
    (64, False): "uint64",
}


def _dtype_named(name: str):
    """The NumPy dtype of a NumPy or ml_dtypes type name, or None if this ml_dtypes lacks it."""
    if hasattr(np, name) and name not in ("int4", "uint4"):
        return np.dtype(getattr(np, name))
    t = getattr(ml_dtypes, name, None)
    return None if t is None else np.dtype(t)


def natural_dtype(fmt: dict):
    """The dtype that holds ``fmt`` bit for bit, or None (then only raw encodings)."""
    if fmt["kind"] == "int":
        name = _INT_LAYOUTS.get((fmt["bits"], fmt["signed"]))
    else:
        layout = (
            fmt["exponent"],
            fmt["mantissa"],
            fmt["bias"],
            fmt["specials"],
            fmt["signed"],
            fmt["subnormals"],
        )
        code_bits = fmt["exponent"] + fmt["mantissa"] + (1 if fmt["signed"] else 0)
        name = None
        if fmt["ignore_low"] == 0 and fmt["bits"] in (code_bits, 8) and fmt["bits"] >= code_bits:
            name = _FLOAT_LAYOUTS.get(layout)
            # a 16-, 32- or 64-bit format is stored in exactly its code width
            if name is not None and code_bits > 8 and fmt["bits"] != code_bits:
                name = None
    return None if name is None else _dtype_named(name)


def raw_dtype(fmt: dict):
    """The unsigned dtype of a format's raw encodings, by storage width (as ``mmac gemm``)."""
    bits = fmt["bits"]
    for width, dt in ((8, np.uint8), (16, np.uint16), (32, np.uint32)):
        if bits <= width:
            return np.dtype(dt)
    return np.dtype(np.uint64)


def result_dtype(fmt: dict):
    """The dtype D comes back in: the natural one, else raw encodings."""
    return natural_dtype(fmt) or raw_dtype(fmt)


def _unsigned_of_size(itemsize: int):
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[itemsize])


# ---------------------------------------------------------------- torch tensors


def narrow_unsigned(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a NumPy unsigned array when it holds ml_dtypes' narrow unsigned integers
    (``uint1``, ``uint2``, ``uint4``: dtype kind ``V`` to NumPy), else ``arr`` itself."""
    name = arr.dtype.name
    if arr.dtype.kind == "V" and name in ("uint1", "uint2", "uint4"):
        if _dtype_named(name) == arr.dtype:
            return arr.astype(np.uint8)
    return arr


def _torch():
    return sys.modules.get("torch")


def is_tensor(x) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_to_ml_dtypes():
    """torch dtypes that NumPy cannot hold, and the ml_dtypes type with the same bits."""
    torch = _torch()
    pairs = {}
    for tname, mname in (
        ("bfloat16", "bfloat16"),
        ("float8_e4m3fn", "float8_e4m3fn"),
        ("float8_e5m2", "float8_e5m2"),
        ("float8_e4m3fnuz", "float8_e4m3fnuz"),
        ("float8_e5m2fnuz", "float8_e5m2fnuz"),
        ("float8_e8m0fnu", "float8_e8m0fnu"),
    ):
        t, m = getattr(torch, tname, None), getattr(ml_dtypes, mname, None)
        if t is not None and m is not None:
            pairs[t] = np.dtype(m)
    return pairs


def tensor_to_numpy(t):
    """A torch tensor as a NumPy array with the same bits (bf16 and fp8 via ml_dtypes)."""
    torch = _torch()
    t = t.detach().cpu()
    special = _torch_to_ml_dtypes().get(t.dtype)
    if special is not None:
        as_int = torch.int16 if special.itemsize == 2 else torch.uint8
        return t.contiguous().view(as_int).numpy().view(special)
    try:
        return t.numpy()
    except TypeError as e:
        raise ValueError(f"tensors of dtype {t.dtype} have no NumPy equivalent: {e}") from None


def numpy_to_tensor(a: np.ndarray, like=None):
    """A NumPy array as a torch tensor with the same bits, on ``like``'s device."""
    torch = _torch()
    a = np.ascontiguousarray(a)
    back = {v: k for k, v in _torch_to_ml_dtypes().items()}
    if a.dtype in back:
        as_int = np.int16 if a.dtype.itemsize == 2 else np.uint8
        t = torch.from_numpy(a.view(as_int).copy()).view(back[a.dtype])
    else:
        t = torch.from_numpy(a.copy())
    if like is not None and like.device.type != "cpu":
        t = t.to(like.device)
    return t


# ---------------------------------------------------------------- operands


def _expected(fmt: dict, operand: str) -> str:
    natural = natural_dtype(fmt)
    name = fmt["name"]
    if natural is None:
        return (
            f"{operand} must be an unsigned integer array of raw `{name}` encodings "
            f"(no NumPy dtype holds {name})"
        )
    return f"{operand} must be {natural.name} (`{name}`) or an unsigned integer array of raw `{name}` encodings"


def encodings(x, fmt: dict, operand: str, native, key: str, ndim: int | None) -> np.ndarray:
    """The raw encodings (``uint64``) of an operand, validated against its format.

    ``native`` is the instruction's native half (for exact encoding of Python numbers),
    ``key`` the operand's format key (``a``, ``b``, ``c``, ``sa``, ``sb``), ``ndim`` the
    rank the operand must have (None: any)."""
    if is_tensor(x):
        arr = tensor_to_numpy(x)
        from_values = False
    elif isinstance(x, (np.ndarray, np.generic)):
        arr = np.asarray(x)
        # (an object array holds Python numbers: values, as a list of them is)
        from_values = arr.dtype.kind == "O" and arr.size > 0
    else:
        arr = np.asarray(x)
        from_values = arr.dtype.kind in "fib" or (arr.dtype.kind == "O" and arr.size > 0)
        if arr.dtype.kind == "u":
            from_values = True
    if not arr.dtype.isnative:
        # (a big-endian array: the same values in the machine's byte order)
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if ndim is not None and arr.ndim != ndim:
        shape = tuple(arr.shape)
        what = "a 2-D matrix" if ndim == 2 else ("a vector" if ndim == 1 else "a scalar")
        raise ValueError(f"{operand} must be {what}, found shape {shape}")
    if from_values:
        if arr.dtype.kind == "b" and not (fmt["kind"] == "int" and fmt["bits"] == 1):
            raise ValueError(f"{operand}: booleans are values only of `b1`, not `{fmt['name']}`")
        try:
            values = arr.astype(np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{operand}: not numbers: {e}") from None
        if arr.dtype.kind in "iu" and np.any(values.astype(np.int64) != arr.astype(np.int64)):
            raise ValueError(f"{operand}: integers beyond 2^53 are not supported as values")
        codes, failed = native.encode(key, values.ravel().tolist())
        if failed is not None:
            flat, why = failed
            at = ", ".join(str(int(i)) for i in np.unravel_index(flat, arr.shape))
            raise ValueError(f"{operand}[{at}]: {why}" if at else f"{operand}: {why}")
        return np.asarray(codes, dtype=np.uint64).reshape(arr.shape)
    natural = natural_dtype(fmt)
    dt = arr.dtype
    if natural is not None and dt == natural:
        if dt == np.bool_:
            return arr.astype(np.uint64)
        if dt.name in ("int4", "uint4"):
            return arr.astype(np.int8).view(np.uint8).astype(np.uint64) & np.uint64(0xF)
        return arr.view(_unsigned_of_size(dt.itemsize)).astype(np.uint64)
    if dt.kind == "u":
        return arr.astype(np.uint64)
    if dt.type is np.void and dt.itemsize in (1, 2, 4, 8):
        # np.save writes ml_dtypes arrays as raw void bytes, and np.load gives them back so
        uint = _unsigned_of_size(dt.itemsize).name
        raise ValueError(
            f"{_expected(fmt, operand)}, found raw bytes ({dt.str}): an ml_dtypes array saved by "
            f"np.save loads as void; pass `arr.view(np.{uint})` (its raw encodings), or view it "
            f"as the ml_dtypes type again"
        )
    raise ValueError(f"{_expected(fmt, operand)}, found {_dtype_label(arr, x)}")


def _dtype_label(arr: np.ndarray, original) -> str:
    if is_tensor(original):
        return str(original.dtype)
    return arr.dtype.name


def from_encodings(codes: np.ndarray, fmt: dict) -> np.ndarray:
    """An array of ``fmt``'s result dtype from raw encodings."""
    natural = natural_dtype(fmt)
    if natural is None:
        return codes.astype(raw_dtype(fmt))
    if natural == np.bool_:
        return codes.astype(np.bool_)
    if natural.name == "int4":
        return ((codes.astype(np.int16) ^ 8) - 8).astype(np.int8).astype(natural)
    if natural.name == "uint4":
        return codes.astype(np.uint8).astype(natural)
    return codes.astype(_unsigned_of_size(natural.itemsize)).view(natural)


def float32_rounded_to_odd(x: np.ndarray) -> np.ndarray:
    """``x`` in float32, rounded to odd: the float32 next toward zero, with its last bit set
    where that is inexact (past float32's range, its largest finite value, so odd). A
    format of at least two fewer significand bits (bf16, tf32, FP8, FP6, FP4) rounds that
    to nearest even exactly as it rounds ``x``: no double rounding, where a float64
    ``x`` rounded first to nearest float32 can make a tie of a value above or below it
    (``1 + 2^-8 + 2^-30`` to bf16)."""
    x = np.asarray(x)
    y = x.astype(np.float32)
    if x.dtype.itemsize <= 4:
        return y  # float32 or narrower: exact
    with np.errstate(invalid="ignore", over="ignore"):
        back = y.astype(np.float64)
        inexact = np.isfinite(x) & (back != x)
        away = inexact & (np.abs(back) > np.abs(x))
    bits = np.ascontiguousarray(y).view(np.uint32).copy()
    bits[away] -= np.uint32(1)  # the float32 next toward zero (infinity: the largest finite)
    bits[inexact] |= np.uint32(1)
    return bits.view(np.float32)


def _refuse_what_has_no_encoding(x: np.ndarray, natural, fmt: dict, operand: str) -> None:
    """A format with neither Inf nor NaN (FP4, FP6) has nothing to round a NaN, an infinity
    or a value past its range into (ml_dtypes saturates those and turns NaN into -0):
    a ValueError naming the first such element."""
    top = float(ml_dtypes.finfo(natural).max)
    # past the largest value by half its unit in the last place: rounds beyond the range
    half_ulp = 2.0 ** np.floor(np.log2(top)) * float(ml_dtypes.finfo(natural).eps) / 2
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(x.astype(np.float64)) < top + half_ulp)
    if bad.any():
        at = np.unravel_index(int(np.flatnonzero(bad.ravel())[0]), x.shape)
        where = f"[{', '.join(str(int(i)) for i in at)}]" if at else ""
        raise ValueError(
            f"{operand}{where} = {float(x[at])!r} has no `{fmt['name']}` encoding: the format "
            f"has no Inf or NaN, and its range ends at ±{top} (scale the values into range)"
        )


def round_to_format(x: np.ndarray, fmt: dict, operand: str = "a value") -> np.ndarray:
    """Float values rounded to nearest even into a float format, as raw-encoding-ready
    arrays: the format's dtype, or for tf32 (no dtype) ``uint32`` encodings. Into a format
    narrower than float32 (whose conversions go through float32) a float64 value goes
    by :func:`float32_rounded_to_odd`, so it is rounded once. Into a format with neither
    Inf nor NaN, a NaN, an infinity or a value past the range is a ValueError naming
    ``operand`` (nothing saturates)."""
    natural = natural_dtype(fmt)
    if fmt["kind"] != "float":
        raise ValueError(f"cannot round floats into the integer format `{fmt['name']}`")
    if natural is not None:
        if natural in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
            return np.asarray(x).astype(natural)  # NumPy's own: rounded once
        if fmt["specials"] == "none":
            _refuse_what_has_no_encoding(np.asarray(x), natural, fmt, operand)
        return float32_rounded_to_odd(x).astype(natural)
    if (fmt["exponent"], fmt["mantissa"], fmt["bias"], fmt["ignore_low"]) == (8, 10, 127, 13):
        # tf32: an f32 whose 13 low bits the hardware ignores; round them off, ties to even
        bits = np.ascontiguousarray(float32_rounded_to_odd(x)).view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32)
        nan = np.isnan(np.asarray(x, dtype=np.float32))
        rounded[nan] = np.uint32(0x7FC00000)
        return rounded
    raise ValueError(f"no rounding into `{fmt['name']}` is available (it has no NumPy dtype)")
