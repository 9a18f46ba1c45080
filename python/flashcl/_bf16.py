"""bfloat16 as uint16 bit patterns, for NumPy without ml_dtypes."""
import numpy as np


def float32_to_bf16(x):
    """bfloat16 bit patterns (uint16) of x, rounded to nearest even (NaN stays NaN)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))) >> 16
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


def bf16_to_float32(bits):
    """The float32 values of bfloat16 bit patterns (exact)."""
    bits = np.asarray(bits, dtype=np.uint16)
    wide = np.ascontiguousarray(bits.astype(np.uint32) << np.uint32(16)).reshape(-1)
    return wide.view(np.float32).reshape(bits.shape)
