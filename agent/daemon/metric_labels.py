"""The labels that let our series join the series of the exporters a site already runs.

GPU series carry dcgm-exporter's identifying labels with the values it gives them, so a
query can join ``clusterdiag_gpu_responsive`` with ``DCGM_FI_DEV_GPU_TEMP`` ``on(UUID)`` or
``on(Hostname, gpu)`` (the ``instance`` label differs: each exporter has its own port).
dcgm-exporter renders ``gpu`` as the DCGM GPU id (NVML's index), ``UUID``, ``pci_bus_id``
as NVML's 8-hex-digit-domain, upper-case bus id, ``device`` as ``nvidia`` + the index,
``modelName`` as NVML's name (blanks optionally replaced with dashes), and ``Hostname`` as
``$NODE_NAME`` or else the kernel's hostname, left out under ``--no-hostname``
(``internal/pkg/hostname/hostname.go``, the metric templates in ``internal/pkg``).

InfiniBand series carry node_exporter's ``device`` (the HCA, ``mlx5_0``) and ``port``
labels. node_exporter's infiniband collector is on by default and already exports the
``counters/`` files listed in ``NODE_EXPORTER_IB_COUNTERS``; a site that runs it sets
``metrics.ib_node_exporter_counters: false`` so they are not stored twice. That is a
setting with a documented default, never something we guess by probing the host.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model.gpu import Gpu

GPU_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName"]
HOSTNAME_LABEL = "Hostname"
IB_LABELS = ["device", "port"]

# The counters/ files node_exporter's infiniband collector reads (through procfs'
# sysfs.InfiniBandClass) and exports as node_infiniband_*: prometheus/node_exporter
# collector/infiniband_linux.go. Its hw_counters/ files are not exported upstream.
NODE_EXPORTER_IB_COUNTERS = frozenset({
    "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
    "local_link_integrity_errors", "multicast_rcv_packets", "multicast_xmit_packets",
    "port_rcv_constraint_errors", "port_rcv_data", "port_rcv_discards", "port_rcv_errors",
    "port_rcv_packets", "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards", "port_xmit_packets",
    "port_xmit_wait", "symbol_error", "unicast_rcv_packets", "unicast_xmit_packets",
    "VL15_dropped",
})

# Files in the counter directories that hold a setting, not a count: hw_counters/lifespan
# is how long (ms) the driver may serve cached counter values. Never exported as a counter.
IB_SETTING_FILES = frozenset({"lifespan"})

_BDF = re.compile(r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")


@dataclass(frozen=True)
class MetricSettings:
    """The ``metrics:`` config section, resolved once per (re)load."""

    hostname: str | None = None  # the Hostname label's value; None: no such label
    replace_blanks_in_model_name: bool = False
    ib_node_exporter_counters: bool = True

    @property
    def gpu_label_names(self) -> list[str]:
        return [*GPU_LABELS, HOSTNAME_LABEL] if self.hostname is not None else list(GPU_LABELS)


def settings_from(section: Mapping[str, Any], node: str, simulated: bool,
                  environ: Mapping[str, str]) -> MetricSettings:
    """``hostname: auto`` follows dcgm-exporter's rule (``$NODE_NAME``, else the kernel's
    hostname; a simulated node's own name under ``--simulate``); ``""`` leaves the label
    out as ``dcgm-exporter --no-hostname`` does; any other string is used as it is."""
    wanted = str(section["hostname"])
    hostname: str | None
    if wanted == "auto":
        hostname = node if simulated else (environ.get("NODE_NAME") or socket.gethostname())
    else:
        hostname = wanted or None
    return MetricSettings(hostname=hostname,
                          replace_blanks_in_model_name=bool(
                              section["replace_blanks_in_model_name"]),
                          ib_node_exporter_counters=bool(section["ib_node_exporter_counters"]))


def nvml_bus_id(bdf: str | None) -> str:
    """``0000:53:00.0`` (sysfs) as NVML and dcgm-exporter write it: ``00000000:53:00.0``."""
    match = _BDF.fullmatch(bdf or "")
    if match is None:
        return ""
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):08X}:{int(bus, 16):02X}:{int(device, 16):02X}.{function}"


def gpu_label_values(index: int | None, gpu: Gpu | None, settings: MetricSettings) -> list[str]:
    """Values for ``settings.gpu_label_names``; what is unknown is empty (no such label to
    Prometheus), so a GPU that stopped answering keeps its index and node."""
    model = (gpu.name or "") if gpu is not None else ""
    if settings.replace_blanks_in_model_name:
        model = model.replace(" ", "-")
    values = ["" if index is None else str(index),
              (gpu.uuid or "") if gpu is not None else "",
              nvml_bus_id(gpu.pci_bdf) if gpu is not None else "",
              "" if index is None else f"nvidia{index}",
              model]
    if settings.hostname is not None:
        values.append(settings.hostname)
    return values
