"""NVLink5 bit error rates as NVML packs them into one field value.

NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_BER (220) and NVML_FI_DEV_NVLINK_COUNT_SYMBOL_BER (222)
answer an integer holding a mantissa and a power of ten: nvml.h (NVML API reference,
"NvLink Methods", docs.nvidia.com/deploy/nvml-api/group__NvLink.html) defines
NVML_NVLINK_BER_MANTISSA_SHIFT 8 / _WIDTH 0xf and NVML_NVLINK_BER_EXP_SHIFT 0 / _WIDTH 0xff,
read with NVML_NVLINK_ERROR_COUNTER_BER_GET; the rate is mantissa x 10^-exponent (DCGM
4.6.0 common/DcgmUtilities.cpp NvmlBerParser). NVML has no zero: mantissa 15 and exponent
255 (1.5e-254) is how it says "no errors" (DCGM nvvs/src/DcgmRecorder.cpp).
"""

from __future__ import annotations

MANTISSA_SHIFT, MANTISSA_MASK = 8, 0xF
EXPONENT_SHIFT, EXPONENT_MASK = 0, 0xFF
ZERO = (15, 255)  # NVML's "no errors": 1.5e-254


def decode(packed: int) -> float:
    """The rate ``packed`` stands for; an exact decimal divided once, so that 1 x 10^-12
    compares equal to ``1e-12`` (no accumulated rounding from a power of 10.0)."""
    mantissa = (packed >> MANTISSA_SHIFT) & MANTISSA_MASK
    exponent = (packed >> EXPONENT_SHIFT) & EXPONENT_MASK
    return float(mantissa / 10 ** exponent)


def encode(mantissa: int, exponent: int) -> int:
    """The field value NVML answers for mantissa x 10^-exponent."""
    return ((mantissa & MANTISSA_MASK) << MANTISSA_SHIFT) | \
        ((exponent & EXPONENT_MASK) << EXPONENT_SHIFT)
