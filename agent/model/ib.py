"""InfiniBand / RoCE devices and ports as /sys/class/infiniband shows them (DESIGN §8)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IbPort:
    port: int
    state: str | None = None  # ACTIVE, DOWN, INIT, ...
    phys_state: str | None = None  # LinkUp, Polling, Disabled, ...
    rate_gbps: float | None = None
    width: str | None = None  # 4X
    speed: str | None = None  # NDR
    link_layer: str | None = None  # InfiniBand | Ethernet
    lid: int | None = None
    sm_lid: int | None = None
    sm_sl: int | None = None
    cap_mask: int | None = None
    gid_prefix: str | None = None
    netdev: str | None = None
    netdev_operstate: str | None = None
    netdev_mtu: int | None = None
    counters: dict[str, int | None] = field(default_factory=dict)
    hw_counters: dict[str, int | None] = field(default_factory=dict)
    saturated: list[str] = field(default_factory=list)
    unknown: dict[str, str] = field(default_factory=dict)


@dataclass
class IbDevice:
    name: str
    fw_ver: str | None = None
    node_guid: str | None = None
    sys_image_guid: str | None = None
    hca_type: str | None = None
    board_id: str | None = None
    node_desc: str | None = None
    pci_bdf: str | None = None
    excluded: bool = False  # not a compute rail: counters not read
    ports: list[IbPort] = field(default_factory=list)
    unknown: dict[str, str] = field(default_factory=dict)
