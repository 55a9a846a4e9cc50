"""The check catalog. This import list is its table of contents: a family not imported
here does not exist."""

from . import detect, fabric, gpu, gpu_memory, host, ib, ib_rates, nccl, nccl_host, nvlink, roce
from .registry import REGISTRY, CheckContext, CheckSpec, check, select

__all__ = ["REGISTRY", "CheckContext", "CheckSpec", "check", "detect", "fabric", "gpu",
           "gpu_memory", "host", "ib", "ib_rates", "nccl", "nccl_host", "nvlink", "roce",
           "select"]
