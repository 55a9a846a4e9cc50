"""What NCCL would find on this node: the library, its settings."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class NcclInfo:
    library_path: str | None = None
    version: str | None = None  # 2.21.5
    error: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    env_sources: dict[str, str] = field(default_factory=dict)  # variable -> where it was read
