"""perftest's ``ib_write_bw`` on a simulated node: perftest 4.5-0.17 (linux-rdma/perftest tag
v4.5-0.17, = Debian bookworm's ``perftest 4.5+0.17-1``; extracted under
/tmp/research/src/perftest-v4.5-0.17), built with CUDA (``HAVE_CUDA``) unless the node's
``perftest_cuda`` says it is the distribution's build without.

What a run prints, in order (src/write_bw.c:55-420): on a parser refusal getopt's complaint,
`` Invalid Command or flag.`` and the usage (perftest_parameters.c:2842-2849) and
`` Parser function exited with Error`` (write_bw.c:69-72), exit 1 — so ``--use_cuda`` on a
build without CUDA, whose option table registers it only ``#ifdef HAVE_CUDA``
(perftest_parameters.c:2289-2291), is refused as the real Debian binary refuses it
(research runs/ib_write_bw_use_cuda_*.txt); the device search (perftest_resources.c:
1044-1070, write_bw.c:80-84) and the port's state (perftest_parameters.c:1940-1944); the
server's waiting banner (write_bw.c:113-117); the connection, which the server accepts only
once it has opened its device — a client that comes earlier is refused
(``Couldn't connect to host:port``, perftest_communication.c:698, no retry, then
write_bw.c:120-124), exit 1; the CUDA lines (perftest_resources.c:63-121, 1666-1686); the
banner (perftest_parameters.c:3158-3299, ``TX depth`` on the client only), the QP
addresses (perftest_communication.c:1710-1750), the result header (perftest_parameters.h:
200-204: ``Gb/sec`` with ``--report_gbits``, else ``MB/sec`` of 2^20 bytes), the result
line (perftest_parameters.h:225 ``REPORT_FMT``) and the closing rule. Real output of this
layout: tests/fixtures/real/active/07_ib_write_bw_*.txt (client and server).

A server and its client meet through small files in a folder (``Rendezvous``), so they find
each other whether SimTools runs them on two threads or a real launcher runs
tool_main.py twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from ...checks.core.topology import pci_distance
from ..model.pci import PciDevice
from . import bandwidth as bw
from .state.hardware import SimGpu, SimNode
from .state.ib import SimHca, gid
from .state.pci import gpu_bridges, hca_bridges
from .toolkit import NotModelled, Printed

RULE = "-" * 87 + "\n"  # RESULT_LINE, perftest_parameters.h:194
DEF_PORT = 18515  # perftest_parameters.h:104
VERSION = "6.06"  # what `ib_write_bw -V` says (research runs/ib_write_bw_V.txt)
# GPUDirect RDMA between a GPU and a NIC across the inter-socket link runs at about half
# the host-memory rate (linux-rdma/perftest#241: ~11000 vs ~23000 MB/s, 'SYS' locality;
# real capture 17 A). Through host bridges of one socket (NODE, PHB) the transfer also
# crosses the root complex: 0.8 is an assumption (no measurement found), marked so.
GDR_LOCALITY = {"PIX": 1.0, "PXB": 1.0, "PHB": 0.8, "NODE": 0.8, "SYS": 0.48}
# getopt_long's table (perftest_parameters.c:2240-2300 @ v4.5-0.17), the options a
# qualification uses; any other is refused as not simulated.
_SHORT_VALUES = {"d": "ib-dev", "i": "ib-port", "s": "size", "n": "iters", "p": "port",
                 "x": "gid-index", "q": "qp", "m": "mtu", "D": "duration"}
_SHORT_FLAGS = {"F": "CPU-freq", "h": "help", "V": "version", "b": "bidirectional",
                "a": "all"}
_LONG_VALUES = {"ib-dev": "d", "ib-port": "i", "size": "s", "iters": "n", "port": "p",
                "gid-index": "x", "qp": "q", "mtu": "m", "duration": "D",
                "use_cuda": "use_cuda", "use_cuda_bus_id": "use_cuda_bus_id"}
_LONG_FLAGS = {"CPU-freq": "F", "help": "h", "version": "V", "report_gbits": "report_gbits",
               "bidirectional": "b", "all": "a"}
_MODELLED = {"d", "i", "s", "n", "p", "F", "h", "V", "report_gbits", "use_cuda"}


@cache
def usage(cuda: bool) -> str:
    """usage() as the build prints it (agent/sim/tool-texts.yaml)."""
    texts = yaml.safe_load((Path(__file__).parent / "tool-texts.yaml").read_text())
    lines = list(texts["ib_write_bw_usage"])
    if cuda:  # perftest_parameters.c:536-541
        at = next(i for i, line in enumerate(lines) if "--tclass" in line) + 1
        lines[at:at] = ["      --use_cuda=<cuda device id> Use CUDA specific device for "
                        "GPUDirect RDMA testing",
                        "      --use_cuda_bus_id=<cuda full BUS id> Use CUDA specific device,"
                        " based on its full PCIe address, for GPUDirect RDMA testing"]
    return "\n".join(lines) + "\n"


@dataclass
class Args:
    device: str | None = None
    ib_port: int = 1
    size: int = 65536
    iters: int = 5000
    port: int = DEF_PORT
    gbits: bool = False
    cuda: int | None = None
    server: str | None = None  # the client's server host; None: this is the server


def _refuse(program: str, complaint: str, cuda: bool) -> Printed:
    """getopt's complaint, perftest's default: branch and usage, main's line; exit 1."""
    return Printed(usage(cuda), f"{program}: {complaint}\n Invalid Command or flag.\n Please "
                                "check command line and run again.\n\n Parser function exited "
                                "with Error\n", 1)


def parse(argv: list[str], cuda: bool) -> Args | Printed:
    """getopt_long over perftest's table: ``--use_cuda`` exists only in a CUDA build; the
    last argument that is not an option is the server (a client)."""
    program = argv[0].rsplit("/", 1)[-1]
    long_values = dict(_LONG_VALUES)
    if not cuda:
        del long_values["use_cuda"], long_values["use_cuda_bus_id"]
    found: list[tuple[str, str]] = []
    hosts: list[str] = []
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if name in _LONG_FLAGS and not eq:
                found.append((_LONG_FLAGS[name], ""))
            elif name in long_values:
                if not eq:
                    if i + 1 >= len(argv):
                        return _refuse(program, f"option '--{name}' requires an argument",
                                       cuda)
                    i, value = i + 1, argv[i + 1]
                found.append((long_values[name], value))
            else:
                return _refuse(program, f"unrecognized option '{arg}'", cuda)
        elif arg.startswith("-") and len(arg) > 1:
            letter = arg[1]
            if letter in _SHORT_FLAGS and len(arg) == 2:
                found.append((letter, ""))
            elif letter in _SHORT_VALUES:
                value = arg[2:]
                if not value:
                    if i + 1 >= len(argv):
                        return _refuse(program, f"option requires an argument -- '{letter}'",
                                       cuda)
                    i, value = i + 1, argv[i + 1]
                found.append((letter, value))
            else:
                return _refuse(program, f"invalid option -- '{letter}'", cuda)
        else:
            hosts.append(arg)
        i += 1
    args = Args(server=hosts[-1] if hosts else None)
    for key, value in found:
        if key not in _MODELLED:
            raise NotModelled(f"ib_write_bw option {key} is not simulated")
        if key == "h":
            return Printed(usage(cuda), "", 1)  # HELP_EXIT -> FAILURE, write_bw.c:69-72
        if key == "V":
            return Printed(f"Version: {VERSION}\n", "", 1)
        if key == "d":
            args.device = value
        elif key in ("i", "s", "n", "p", "use_cuda"):
            if not value.isdigit():
                raise NotModelled(f"ib_write_bw -{key} {value!r} is not simulated")
            setattr(args, {"i": "ib_port", "s": "size", "n": "iters", "p": "port",
                           "use_cuda": "cuda"}[key], int(value))
        elif key == "report_gbits":
            args.gbits = True
    return args


def _bdf_parts(bdf: str) -> tuple[int, int, int]:
    domain, bus, rest = bdf.split(":")
    return int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)


def locality(node: SimNode, gpu: SimGpu, hca: SimHca) -> str:
    """The nvidia-smi class of the PCIe path between a GPU and an RDMA device."""
    a = PciDevice(gpu.bdf, 0x10DE, 0, 0x030200, numa_node=gpu.numa,
                  path=[*gpu_bridges(node, gpu), gpu.bdf])
    b = PciDevice(hca.pci_bdf, 0x15B3, 0, 0x020700, numa_node=hca.numa,
                  path=[*hca_bridges(node, hca), hca.pci_bdf])
    return pci_distance(a, b)


def _hex(seed: str, digits: int) -> int:
    return int(hashlib.sha256(seed.encode()).hexdigest()[:digits], 16)


def _address(side: str, seed: str, hca: SimHca, ethernet: bool) -> str:
    """BASIC_ADDR_FMT + RDMA_FMT (perftest_communication.h:86-92), and the GID line
    (PERF_GID_FMT, :99) where there is a GID index (RoCE)."""
    port = hca.ports[0]
    line = (f" {side} address: LID {_hash_fmt(port.lid)} QPN {_c_hex(_hex(seed + 'q', 4), 6)} "
            f"PSN {_c_hex(_hex(seed + 'p', 6), 6)} RKey {_c_hex(_hex(seed + 'r', 6), 8)} "
            f"VAddr {_c_hex(0x7F0000000000 + _hex(seed + 'v', 7) * 0x1000, 16)}\n")
    if ethernet:
        raw = bytes.fromhex(gid(hca, port).replace(":", ""))
        line += " GID: " + ":".join(f"{b:02d}" for b in raw) + "\n"
    return line


def _c_hex(value: int, width: int) -> str:
    """C's %#0<width>x: 0x and zero padding to the width, the 0x counted; 0 alone for 0."""
    if value == 0:
        return "0" * width
    return "0x" + f"{value:x}".rjust(width - 2, "0")


def _hash_fmt(value: int) -> str:
    return _c_hex(value, 4)  # %#04x


def banner(args: Args, hca: SimHca, client: bool) -> str:
    """ctx_print_test_info (perftest_parameters.c:3158-3299) for RDMA_Write BW, RC, one QP."""
    ethernet = hca.ports[0].link_layer == "Ethernet"
    text = (RULE + "                    RDMA_Write BW Test\n"
            f" Dual-port       : OFF\t\tDevice         : {hca.name}\n"
            " Number of qps   : 1\t\tTransport type : IB\n"
            " Connection type : RC\t\tUsing SRQ      : OFF\n"
            " PCIe relax order: ON\n ibv_wr* API     : ON\n")
    if client:
        text += " TX depth        : 128\n"
    text += (" CQ Moderation   : 100\n"
             " Mtu             : 4096[B]\n"  # the port's active MTU, IB and RoCE alike
             f" Link type       : {'Ethernet' if ethernet else 'IB'}\n")
    if ethernet:
        text += " GID index       : 3\n"  # the IPv4-mapped RoCE v2 entry, get_best_gid_index
    return text + " Max inline data : 0[B]\n rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n" \
        + RULE


def result_line(size: int, iters: int, gbps: float, gbits: bool) -> str:
    """REPORT_FMT (perftest_parameters.h:225); REPORT_FMT_EXT below 0.1 Gb/s (:229)."""
    value = gbps if gbits else gbps * 1e9 / 8 / 1048576
    peak = value * 1.0008
    rate = gbps * 1e9 / 8 / size / 1e6
    if gbits and value < 0.1:
        return f" {size:<7}    {iters}           {peak:<7.6f}            {value:<7.6f}" \
               f"            {rate:<7.6f}\n"
    return f" {size:<7}    {iters:<10}       {peak:<7.2f}            {value:<7.2f}\t\t   " \
           f"{rate:<7.6f}\n"


def result_header(gbits: bool) -> str:
    """RESULT_FMT / RESULT_FMT_G (perftest_parameters.h:200, 204); RESULT_EXT ends it."""
    unit = "Gb/sec" if gbits else "MB/sec"
    return f" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]"


def cuda_lines(node: SimNode, args: Args, pid: int) -> tuple[str, str]:
    """pp_init_gpu and the buffer (perftest_resources.c:63-121, 1666-1686), and what
    destroy_ctx says at the end (:1474-1482, 123-127)."""
    gpu = node.gpus[args.cuda or 0]
    lines = "initializing CUDA\nListing all CUDA devices in system:\n"
    for g in node.gpus:
        _, bus, device = _bdf_parts(g.bdf)
        lines += f"CUDA device {g.index}: PCIe address is {bus:02X}:{device:02X}\n"
    address = 0x7F3FA4000000 + (args.cuda or 0) * 0x10000000
    lines += (f"\nPicking device No. {gpu.index}\n[pid = {pid}, dev = {gpu.index}] device name "
              f"= [{gpu.name}]\ncreating CUDA Ctx\nmaking it the current CUDA Ctx\n"
              f"cuMemAlloc() of a {2 * args.size} bytes GPU buffer\n"
              f"allocated GPU buffer address at {address:016x} pointer={address:#x}\n")
    return lines, f"deallocating RX GPU buffer {address:016x}\ndestroying current CUDA Ctx\n"


class Rendezvous:
    """Where simulated servers listen for their clients: ``<host>_<port>.listen`` (the
    server's pid, written once it listens), ``.claim`` (taken by the one client it
    accepts), ``.done`` (the client's figures, for the server to print)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, host: str, port: int, suffix: str) -> Path:
        return self.folder / f"{host}_{port}.{suffix}"

    def listen(self, host: str, port: int, hca: str, gpu: int | None) -> None:
        """Listen, saying which device the server opened and which GPU's memory its
        buffer is in (None: host memory)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for suffix in ("claim", "done"):
            self._path(host, port, suffix).unlink(missing_ok=True)
        temporary = self._path(host, port, f"listen.{os.getpid()}")
        temporary.write_text(json.dumps({"pid": os.getpid(), "hca": hca, "gpu": gpu}))
        temporary.replace(self._path(host, port, "listen"))

    def connect(self, host: str, port: int) -> dict[str, Any] | None:
        """The listening server's pid, device and GPU, when one listens there (alive) and
        this client is the one it accepts; None otherwise."""
        try:
            server: dict[str, Any] = json.loads(self._path(host, port, "listen").read_text())
            os.kill(int(server["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        try:
            os.close(os.open(self._path(host, port, "claim"), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return None
        return server

    def finish(self, host: str, port: int, figures: dict[str, object]) -> None:
        temporary = self._path(host, port, f"done.{os.getpid()}")
        temporary.write_text(json.dumps(figures))
        temporary.replace(self._path(host, port, "done"))

    def wait(self, host: str, port: int, timeout_s: float) -> dict[str, object] | None:
        """The client's figures once it has run, None at the deadline."""
        end = time.monotonic() + timeout_s
        done = self._path(host, port, "done")
        try:
            while time.monotonic() < end:
                if done.exists():
                    figures: dict[str, object] = json.loads(done.read_text())
                    return figures
                time.sleep(0.01)
            return None
        finally:
            for suffix in ("listen", "claim", "done"):
                self._path(host, port, suffix).unlink(missing_ok=True)


class ServerTimeout(Exception):
    """A server no client reached before its deadline (the real one waits for ever)."""


def _device(node: SimNode, args: Args) -> SimHca | Printed:
    """ctx_find_dev (perftest_resources.c:1040-1072) and the port check
    (perftest_parameters.c:1927-1944), with main's lines (write_bw.c:80-107)."""
    present = [h for h in node.hcas if h.present]
    if not present:
        return Printed("", " Did not detect devices \n If device exists, check if driver is up\n"
                           " Unable to find the Infiniband/RoCE device\n", 1)
    hca = present[0] if args.device is None else next(
        (h for h in present if h.name == args.device), None)
    if hca is None:
        return Printed("", f"IB device {args.device} not found\n Unable to find the "
                           "Infiniband/RoCE device\n", 1)
    port = next((p for p in hca.ports if p.port == args.ib_port), None)
    if port is None:
        return Printed("", f" Unable to query port {args.ib_port} attributes\n Couldn't set the "
                           "link layer\n Couldn't get context for the device\n", 1)
    if port.state != "ACTIVE":
        names = {"DOWN": "Down", "INIT": "Init", "ARMED": "Armed", "ACTIVE_DEFER": "Active Defer"}
        return Printed("", f" Port number {args.ib_port} state is {names.get(port.state, '')}\n"
                           " Couldn't set the link layer\n Couldn't get context for the device\n",
                       1)
    return hca


def server(node: SimNode, argv: list[str], meet: Rendezvous, timeout_s: float) -> Printed:
    """The server half: opens its device (``perftest_open_s``), listens, waits for its
    client, prints the client's figures (xchg_bw_reports, write_bw.c:262-264)."""
    parsed = parse(argv, node.perftest_cuda)
    if isinstance(parsed, Printed):
        return parsed
    found = _device(node, parsed)
    if isinstance(found, Printed):
        return found
    time.sleep(node.perftest_open_s)
    meet.listen(node.name, parsed.port, found.name, parsed.cuda)
    figures = meet.wait(node.name, parsed.port, max(timeout_s - node.perftest_open_s, 0.0))
    if figures is None:
        raise ServerTimeout(f"{argv[0]}: no answer within {timeout_s:g} s")
    pid = os.getpid()
    out = ("\n************************************\n* Waiting for client to connect... *\n"
           "************************************\n")
    tail = ""
    if parsed.cuda is not None:
        lines, tail = cuda_lines(node, parsed, pid)
        out += lines
    ethernet = found.ports[0].link_layer == "Ethernet"
    seed = f"{node.name}/{parsed.port}/{figures['client']}"
    out += banner(parsed, found, client=False)
    out += _address("local", seed + "/s", found, ethernet)
    out += str(figures["remote_address"])
    out += RULE + result_header(parsed.gbits) + "\n"  # RESULT_FMT + RESULT_EXT
    out += result_line(parsed.size, parsed.iters, float(str(figures["gbps"])), parsed.gbits)
    out += RULE + tail
    return Printed(out)


Rate = Callable[[SimNode, SimHca, SimNode | None, int | None, str, int | None], float]


def client(node: SimNode, argv: list[str], meet: Rendezvous, nodes: dict[str, SimNode],
           rate: Rate) -> Printed:
    """The client half: connects to its server's node (``localhost`` is its own), runs,
    hands the server its figures. ``rate(node, hca, remote, gpu, remote_hca, remote_gpu)``
    is the Gb/s (remote None: the loopback)."""
    parsed = parse(argv, node.perftest_cuda)
    if isinstance(parsed, Printed):
        return parsed
    found = _device(node, parsed)
    if isinstance(found, Printed):
        return found
    host = str(parsed.server)
    target = node.name if host in ("localhost", "127.0.0.1", node.name) else host
    # perftest_communication.c:1370 (no newline in 4.5-0.17), then write_bw.c:121.
    fail = "Unable to open file descriptor for socket connection Unable to init the socket " \
           "connection\n"
    if target not in nodes:
        return Printed("", f"Name or service not known for {host}:{parsed.port}\nProblem in "
                           f"resolving basic address and port\n{fail}", 1)
    listener = meet.connect(target, parsed.port)
    if listener is None:
        return Printed("", f"Couldn't connect to {host}:{parsed.port}\n{fail}", 1)
    remote = nodes[target] if target != node.name else None
    gbps = rate(node, found, remote, parsed.cuda, str(listener["hca"]), listener["gpu"])
    pid = os.getpid()
    ethernet = found.ports[0].link_layer == "Ethernet"
    seed = f"{target}/{parsed.port}/{node.name}"
    mine = _address("local", seed + "/c", found, ethernet)
    server_hca = next((h for h in (remote or node).hcas if h.name == listener["hca"]), found)
    meet.finish(target, parsed.port, {"client": node.name, "gbps": gbps,
                                      "remote_address": mine.replace(" local ", " remote ", 1)})
    out, tail = "", ""
    if parsed.cuda is not None:
        lines, tail = cuda_lines(node, parsed, pid)
        out += lines
    out += banner(parsed, found, client=True) + mine
    out += _address("remote", seed + "/s", server_hca, ethernet)
    out += RULE + result_header(parsed.gbits) + "\n"
    out += result_line(parsed.size, parsed.iters, gbps, parsed.gbits) + RULE + tail
    seconds = parsed.size * parsed.iters * 8 / (gbps * 1e9) if gbps else 0.0
    return Printed(out, seconds=seconds)


def _gdr(node: SimNode, hca_name: str, gpu: int | None) -> float:
    """The factor of a buffer in GPU ``gpu``'s memory (None: host memory) for the NIC."""
    hca = next((h for h in node.hcas if h.name == hca_name), None)
    if gpu is None or hca is None or not 0 <= gpu < len(node.gpus):
        return 1.0
    return GDR_LOCALITY.get(locality(node, node.gpus[gpu], hca), 1.0)


def nic_rate(node: SimNode, hca: SimHca, remote: SimNode | None, gpu: int | None,
             remote_hca: str, remote_gpu: int | None, noise: float) -> float:
    """Gb/s of one rail: the loopback's, or the slower end's across the cable; each end's
    buffer at its GPU's locality to its NIC (--use_cuda), the slower end bounding it."""
    if remote is None:
        return bw.nic_gbps(node, hca.name) * min(_gdr(node, hca.name, gpu),
                                                 _gdr(node, remote_hca, remote_gpu)) * noise
    gbps = min(bw.cross_rail_gbps(node, hca.name) * _gdr(node, hca.name, gpu),
               bw.cross_rail_gbps(remote, remote_hca) * _gdr(remote, remote_hca, remote_gpu))
    return gbps * noise
