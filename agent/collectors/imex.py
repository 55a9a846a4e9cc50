"""IMEX on an NVL72 tray: the DRA driver's kubelet plugin, the nodes file, the channel
devices and the domain's state from ``nvidia-imex-ctl -N -j``.

Where each comes from:

- The NVIDIA DRA driver's ComputeDomain kubelet plugin makes its folder
  ``/var/lib/kubelet/plugins/compute-domain.nvidia.com`` at start
  (kubernetes-sigs/dra-driver-nvidia-gpu cmd/compute-domain-kubelet-plugin/main.go @ 89aa5bb:
  ``DriverPluginPath`` joins ``kubeletplugin.KubeletPluginsDir``, ``/var/lib/kubelet/plugins``,
  with ``DriverName = "compute-domain.nvidia.com"``; ``RunPlugin`` calls ``os.MkdirAll`` on
  it), and nothing removes it when the driver is uninstalled, so a site that moved from
  the DRA driver to a host IMEX service keeps it: it says the driver was installed once.
- Whether the plugin runs is its kubelet registration socket: the kubeletplugin helper
  listens on ``<driver name>-reg.sock`` in ``KubeletRegistryDir``,
  ``/var/lib/kubelet/plugins_registry`` (vendor/k8s.io/dynamic-resource-allocation/
  kubeletplugin/draplugin.go @ 9593204: ``KubeletRegistryDir``, and ``Start``:
  ``o.driverName + uidPart + "-reg.sock"``; the compute-domain plugin sets no rolling-update
  uid and probes the same path in its own health check, cmd/compute-domain-kubelet-plugin/
  health.go: ``path.Join(...kubeletRegistrarDirectoryPath, DriverName+"-reg.sock")``). A
  socket file outlives a killed plugin, so the plugin counts as live only when the socket
  accepts a connection; a simulated tree, which holds no listener, stands for a live plugin
  with the file alone.
- The nodes file ``/etc/nvidia-imex/nodes_config.cfg`` holds one IP address or host name
  per line (IMEX guide, config.html: ``IMEX_NODE_CONFIG_FILE``; 580's daemon log "Treating
  node config entry ... as a host name", shared/data/real/gb200 dra-driver#1465).
- Channel devices live in ``/dev/nvidia-caps-imex-channels/channelN`` (IMEX guide,
  imexchannels.html).
- ``nvidia-imex-ctl -N -j`` prints the domain as JSON (IMEX guide, cmdservice.html: "-j:
  Output of the -n/-N command will be in JSON"): a top-level ``status`` (UP, DOWN or
  DEGRADED: DCGM's DcgmImexManager::ParseDomainStatusJson) and ``nodes`` keyed by index,
  each with ``status``, ``host``, ``hostName`` (with -H), ``version`` and ``connections``
  (NVIDIA/ai-cloud-validation isvctl/configs/providers/aws/scripts/network/
  imex_domain_test.py @ 505d262, confirmed there against live 580.95.05 domains). No real
  JSON capture was found, so the text form is parsed as well: a tool that ignores ``-j``
  is still read. Its node lines are held to two published outputs: IMEX 570.00's
  ``Node #0   - 10.136.206.48   - READY``, with no version part (a GH200 MNNVL domain,
  jgehrcke/jpsnips-nv @ 2d4acc3, MIT: shared/data/real/gb200/imex-ctl-status-and-daemon-
  log__GH200-MNNVL-1node-2node__jpsnips-nv.txt), and an 18-tray 570.172 listing ending
  ``- Version: 570.172`` (shared/data/real/gb200/imex-ctl-N__p6e-gb200-18node-UP...), a
  documentation example whose source is UNATTRIBUTED in that folder's SOURCES.md and which
  its own header says one of two published copies of was hand-edited. A ``Node #`` line of
  neither form refuses the whole output, rather than leave a tray out of a DOWN domain.

Which entry of the nodes file is this tray: the IMEX daemon itself finds its own entry by
matching the entries against its network interfaces' addresses (570's daemon log "No
matching network interface found for any IP addresses in the node configuration file",
dra-driver-nvidia-gpu#289), or takes an entry as a host name (580). The tray's addresses are
the kernel's local routes: IPv4 from ``/proc/net/fib_trie``, where each address is a
``|-- ADDR`` leaf followed by its aliases ``/PLEN SCOPE TYPE`` and a local one is
``/32 host LOCAL`` (Linux net/ipv4/fib_trie.c, ``fib_trie_seq_show``); IPv6 from
``/proc/net/if_inet6``, one address per line as 32 hex digits first (net/ipv6/addrconf.c,
``if6_seq_show``: ``"%pi6 %02x %02x %02x %02x %8s"``). A name entry is this tray when it
is the tray's host name, or its first label is. The cluster view maps the peers other
trays list back to their nodes through these entries (cluster.imex_domain).

The command can hang (dra-driver-nvidia-gpu#1417: "nvidia-imex-ctl ... -N may hang"), so it
runs with a deadline of 30 s at most, inside the run's budget, and only where the host's
IMEX service is up: ``-N`` asks the running daemon. What it prints comes from other trays
(host names, versions) and is bounded and validated before it is kept.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import stat
from collections.abc import Callable
from pathlib import Path

from ..model.host import IMEX_DOMAIN_STATES, IMEX_HOST, IMEX_STATUS, ImexDomain, ImexPeer, ImexState
from ..read.sources import CommandResult
from ..read.sysfs import FileCounter, list_dir, read_reason, read_text

DRA_PLUGIN_DIR = "/var/lib/kubelet/plugins/compute-domain.nvidia.com"
DRA_REGISTRATION = "/var/lib/kubelet/plugins_registry/compute-domain.nvidia.com-reg.sock"
CONNECT_TIMEOUT_S = 0.5  # a live plugin's gRPC server accepts at once
NODES_CONFIG = "/etc/nvidia-imex/nodes_config.cfg"
CHANNELS_DIR = "/dev/nvidia-caps-imex-channels"
FIB_TRIE = "/proc/net/fib_trie"
IF_INET6 = "/proc/net/if_inet6"
IMEX_CTL = ["nvidia-imex-ctl", "-N", "-j"]
IMEX_CTL_TIMEOUT_S = 30.0
# An NVL72 domain has 18 trays; a nodes file or a domain listing of more than this many
# entries is not an IMEX domain and is refused rather than kept.
MAX_NODES = 1024
MAX_OUTPUT_CHARS = 1 << 20
DOMAIN_STATES = IMEX_DOMAIN_STATES
_HOST = re.compile(IMEX_HOST)
_TOKEN = re.compile(IMEX_STATUS)
_VERSION = re.compile(r"[0-9][0-9.]{0,31}")
# "Node #0   - 172.31.48.81    - READY                - Version: 570.172" (the 570.172
# example below); IMEX 570.00 prints no version part: "Node #0   - 10.136.206.48   - READY"
# (jgehrcke/jpsnips-nv @ 2d4acc3, repros/imex-1node-fabric-hdl-import101/README.md).
_TEXT_NODE = re.compile(
    r"Node #(\d{1,4})\s+-\s+(\S+)\s+-\s+(\S+)(?:\s+-\s+Version:\s*(\S*))?\s*")
_TEXT_STATE = re.compile(r"Domain State:\s*(\S+)\s*")

Run = Callable[[list[str], float], CommandResult | None]


class ImexOutputError(ValueError):
    """The tool's output is not a domain listing we can trust; the message says why."""


def read(path: Callable[[str], Path], files: FileCounter, run: Run,
         service_active: bool, hostname: str = "", simulated: bool = False) -> ImexState:
    """The tray's IMEX state; ``run(argv, limit_s)`` runs a command within the deadline
    (None when no time is left), ``service_active`` says whether nvidia-imex runs,
    ``hostname`` is this node's name and ``simulated`` says the tree is the simulator's."""
    state = ImexState(dra_plugin=path(DRA_PLUGIN_DIR).is_dir())
    if state.dra_plugin:
        registration = path(DRA_REGISTRATION)
        why = ((None if registration.exists() else "missing") if simulated
               else socket_refusal(registration))
        state.dra_live = why is None
        if why is not None:
            state.unknown["dra_live"] = f"{DRA_REGISTRATION}: {why}"
    state.nodes_config = _nodes_config(path, files, state.unknown)
    if state.nodes_config is not None:
        state.own = own_entries(state.nodes_config, _local_addresses(path, files), hostname)
    channels = path(CHANNELS_DIR)
    if channels.is_dir():
        state.channels = sorted(n for n in list_dir(channels) if re.fullmatch(r"channel\d+", n))
    else:
        state.unknown["channels"] = f"{CHANNELS_DIR}: missing"
    if service_active:
        state.domain = _domain(run, state.unknown)
    return state


def socket_refusal(where: Path, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """None when ``where`` is a unix socket that accepts a connection, else why not
    (missing, not a socket, refused: a plugin that died, permission denied, too slow)."""
    try:
        mode = os.stat(where).st_mode
    except OSError as exc:
        return read_reason(exc)
    if not stat.S_ISSOCK(mode):
        return "not a socket"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout_s)
        try:
            client.connect(os.fspath(where))
        except TimeoutError:
            return f"no answer within {timeout_s:g} s"
        except OSError as exc:
            return exc.strerror or type(exc).__name__
    return None


def _nodes_config(path: Callable[[str], Path], files: FileCounter,
                  unknown: dict[str, str]) -> list[str] | None:
    text, reason = read_text(path(NODES_CONFIG), files)
    if text is None:
        unknown["nodes_config"] = f"{NODES_CONFIG}: {reason}"
        return None
    try:
        return parse_nodes_config(text)
    except ImexOutputError as exc:
        unknown["nodes_config"] = f"{NODES_CONFIG}: {exc}"
        return None


def parse_nodes_config(text: str) -> list[str]:
    """The addresses of a nodes file: one per line, blank lines and ``#`` comments left out."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        if not _HOST.fullmatch(entry):
            raise ImexOutputError(f"line {number}: not an IP address or host name: "
                                  f"{entry[:60]!r}")
        entries.append(entry)
        if len(entries) > MAX_NODES:
            raise ImexOutputError(f"more than {MAX_NODES} entries")
    if not entries:
        raise ImexOutputError("no entries")
    return entries


def _local_addresses(path: Callable[[str], Path], files: FileCounter) -> set[str]:
    text4, _ = read_text(path(FIB_TRIE), files)
    text6, _ = read_text(path(IF_INET6), files)
    return local_addresses(text4 or "", text6 or "")


def local_addresses(fib_trie: str, if_inet6: str) -> set[str]:
    """This host's own addresses, in ``ipaddress``'s compressed form: the ``/32 host
    LOCAL`` leaves of ``/proc/net/fib_trie`` and every line of ``/proc/net/if_inet6``."""
    found: set[str] = set()
    leaf = None
    for line in fib_trie.splitlines():
        text = line.strip()
        if text.startswith("|-- "):
            leaf = text[4:]
        elif leaf is not None and text.startswith("/32 ") and text.split()[-1] == "LOCAL":
            found.add(leaf)
    for line in if_inet6.splitlines():
        digits = line.split()[:1]
        if digits and re.fullmatch(r"[0-9a-f]{32}", digits[0]):
            found.add(str(ipaddress.IPv6Address(int(digits[0], 16))))
    return found


def own_entries(entries: list[str], addresses: set[str], hostname: str) -> list[str]:
    """The nodes-file entries that are this host: one of its ``addresses``, or its
    ``hostname`` (whole, or the first labels of both alike)."""
    short = hostname.split(".", 1)[0]

    def mine(entry: str) -> bool:
        try:
            return str(ipaddress.ip_address(entry)) in addresses
        except ValueError:
            return bool(short) and (entry == hostname or entry.split(".", 1)[0] == short)

    return [entry for entry in entries if mine(entry)]


def _domain(run: Run, unknown: dict[str, str]) -> ImexDomain | None:
    result = run(IMEX_CTL, IMEX_CTL_TIMEOUT_S)
    if result is None:
        unknown["domain"] = "nvidia-imex-ctl: no time left before the deadline"
        return None
    if result.error is not None or result.returncode != 0:
        first = (result.stderr.strip() or result.stdout.strip()).splitlines()[:1]
        unknown["domain"] = result.error or (f"nvidia-imex-ctl: exit {result.returncode}"
                                             + (f": {first[0][:120]}" if first else ""))
        return None
    try:
        return parse_domain(result.stdout)
    except ImexOutputError as exc:
        unknown["domain"] = f"nvidia-imex-ctl: {exc}"
        return None


def parse_domain(output: str) -> ImexDomain:
    """The domain from ``nvidia-imex-ctl -N`` output, JSON or text; ImexOutputError when it
    is neither, too large, or holds values no IMEX daemon prints."""
    if len(output) > MAX_OUTPUT_CHARS:
        raise ImexOutputError(f"output of {len(output)} characters, more than "
                              f"{MAX_OUTPUT_CHARS}")
    if output.lstrip().startswith("{"):
        return _parse_json(output)
    return _parse_text(output)


def _parse_json(output: str) -> ImexDomain:
    try:
        data = json.loads(output)
    except (ValueError, RecursionError) as exc:
        raise ImexOutputError(f"not JSON: {str(exc)[:80]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict):
        raise ImexOutputError("JSON without a 'nodes' object")
    status = _domain_status(data.get("status"))
    nodes = []
    for key, entry in data["nodes"].items():
        if not isinstance(entry, dict) or not (isinstance(key, str) and key.isdecimal()
                                               and len(key) <= 4):
            raise ImexOutputError(f"node entry {str(key)[:20]!r} is not an indexed object")
        nodes.append(_peer(int(key), entry.get("host"), entry.get("status"),
                           entry.get("version"), entry.get("hostName")))
    return ImexDomain(status, _bounded(nodes), "json")


def _parse_text(output: str) -> ImexDomain:
    nodes, status = [], None
    for line in output.splitlines():
        if (node := _TEXT_NODE.fullmatch(line)) is not None:
            index, host, peer_status, version = node.groups()
            nodes.append(_peer(int(index), host, peer_status, version or None, None))
        elif line.startswith("Node #"):  # a tray left out would go unnamed in a DOWN domain
            raise ImexOutputError(f"node line not understood: {line[:80]!r}")
        elif (state := _TEXT_STATE.fullmatch(line)) is not None:
            status = state.group(1)
    if status is None:
        raise ImexOutputError("neither JSON nor a 'Domain State:' line")
    return ImexDomain(_domain_status(status), _bounded(nodes), "text")


def _domain_status(value: object) -> str:
    if value not in DOMAIN_STATES:
        raise ImexOutputError(f"domain status {str(value)[:20]!r} is none of "
                              f"{', '.join(DOMAIN_STATES)}")
    return str(value)


def _peer(index: int, host: object, status: object, version: object,
          host_name: object) -> ImexPeer:
    if not isinstance(host, str) or not _HOST.fullmatch(host):
        raise ImexOutputError(f"node {index}: host {str(host)[:40]!r} is no address")
    if not isinstance(status, str) or not _TOKEN.fullmatch(status):
        raise ImexOutputError(f"node {index}: status {str(status)[:40]!r} is no status")
    if version is not None and not (isinstance(version, str) and _VERSION.fullmatch(version)):
        version = None  # a peer that never answered has no version to show
    if host_name is not None and not (isinstance(host_name, str) and _HOST.fullmatch(host_name)):
        raise ImexOutputError(f"node {index}: host name {str(host_name)[:40]!r} is no name")
    return ImexPeer(index, host, status, host_name, version)


def _bounded(nodes: list[ImexPeer]) -> list[ImexPeer]:
    if len(nodes) > MAX_NODES:
        raise ImexOutputError(f"{len(nodes)} nodes, more than {MAX_NODES}")
    return sorted(nodes, key=lambda n: n.index)
