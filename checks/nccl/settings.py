"""NCCL settings against the node they will run on: names that resolve, values that parse,
and the settings that quietly cripple multi-node training.

Matching follows NCCL (``src/misc/utils.cc`` parseStringList/matchIfList):
a list of comma-separated tokens, ``^`` first to exclude, ``=`` first for exact
names, otherwise each token is a *prefix* (``mlx5_1`` also selects ``mlx5_10``..); an HCA
token may carry ``:port``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...agent.model.nccl import HcaPort, NcclInfo
from ...agent.model.record import record
from ..core.finding import Action, Finding

NODE = "node"
FIX = Action.FIX_CONFIG
_UP = ("up", "unknown")  # "unknown": loopback and some virtual interfaces report it
GDR_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS")


@record(frozen=True)
class NameList:
    exclude: bool
    exact: bool
    tokens: tuple[str, ...]


def parse_list(value: str) -> NameList:
    text = value.strip()
    exclude = text.startswith("^")
    text = text[1:] if exclude else text
    exact = text.startswith("=")
    text = text[1:] if exact else text
    return NameList(exclude, exact, tuple(t.strip() for t in text.split(",") if t.strip()))


def _matches(token: str, name: str, exact: bool) -> bool:
    return name == token if exact else name.startswith(token)


def check_ib_hca(value: str, ports: dict[str, HcaPort]) -> Iterator[Finding]:
    spec = parse_list(value)
    devices = sorted({key.split("/")[0] for key in ports})
    selected: set[str] = set()
    for token in spec.tokens:
        name, _, rest = token.partition(":")
        port = rest.split(":")[0]
        if port and not port.isdecimal():
            yield Finding.fail(NODE, "NCCL_IB_HCA has a token with a bad port", token,
                               "<hca>[:<port>]", FIX)
            continue
        keys = [k for k in ports if _matches(name, k.split("/")[0], spec.exact)
                and (not port or k.split("/")[1] == port)]
        if not keys:
            status = Finding.warn if spec.exclude else Finding.fail
            yield status(NODE, "NCCL_IB_HCA names an HCA this node does not have", token,
                         devices, FIX)
            continue
        extra = sorted({k.split("/")[0] for k in keys} - {name})
        if not spec.exact and name in devices and extra:
            yield Finding.warn(NODE, "NCCL_IB_HCA token also selects other HCAs by prefix "
                               "(use '=' for exact names)", {token: extra}, f"={name}", FIX)
        selected.update(keys)
    if spec.exclude:
        selected = set(ports) - selected
    active = sorted(k for k in selected if ports[k].state == "ACTIVE")
    down = sorted(k for k in selected if ports[k].state != "ACTIVE")
    if not active:
        yield Finding.fail(NODE, "NCCL_IB_HCA leaves NCCL no ACTIVE port: it falls back to "
                           "TCP sockets", value, "ACTIVE ports", FIX)
    elif down and not spec.exclude:  # an exclude list leaves NCCL its ACTIVE ports only
        yield Finding.warn(NODE, "NCCL_IB_HCA selects ports that are not ACTIVE", down,
                           "ACTIVE", Action.INVESTIGATE)


def check_socket_ifname(value: str, netdevs: dict[str, str]) -> Iterator[Finding]:
    spec = parse_list(value)
    if spec.exclude:
        left = [n for n in netdevs if netdevs[n] in _UP
                and not any(_matches(t, n, spec.exact) for t in spec.tokens)]
        if not left:
            yield Finding.fail(NODE, "NCCL_SOCKET_IFNAME excludes every interface that is up",
                               value, sorted(netdevs), FIX)
        return
    for token in spec.tokens:
        names = [n for n in netdevs if _matches(token, n, spec.exact)]
        if not names:
            yield Finding.fail(NODE, "NCCL_SOCKET_IFNAME names no interface on this node",
                               token, sorted(netdevs), FIX)
        elif not any(netdevs[n] in _UP for n in names):
            yield Finding.fail(NODE, "NCCL_SOCKET_IFNAME names only interfaces that are down",
                               {n: netdevs[n] for n in names}, "up", FIX)


def check_gid_index(value: str, ports: dict[str, HcaPort], version: str | None
                    ) -> Iterator[Finding]:
    if not value.strip().isdecimal():
        yield Finding.fail(NODE, "NCCL_IB_GID_INDEX is not a GID table index", value,
                           "an integer, or unset", FIX)
        return
    roce = {k: p for k, p in ports.items() if p.link_layer == "Ethernet" and p.state == "ACTIVE"}
    empty = sorted(k for k, p in roce.items()
                   if not p.gid or set(p.gid.replace(":", "")) <= {"0"})
    if empty:
        yield Finding.fail(NODE, "NCCL_IB_GID_INDEX points at an empty GID entry on a RoCE "
                           "port", {k: roce[k].gid for k in empty}, "a RoCE v2 GID", FIX)
    elif roce and _at_least(version, (2, 21)):
        yield Finding.warn(NODE, "NCCL_IB_GID_INDEX is set: NCCL >= 2.21 picks the GID itself",
                           value, "unset", FIX)


def _at_least(version: str | None, wanted: tuple[int, int]) -> bool:
    try:
        parts = tuple(int(p) for p in (version or "").split(".")[:2])
    except ValueError:
        return False
    return len(parts) == 2 and parts >= wanted


def gdr_level(value: str) -> str | None:
    """NCCL_NET_GDR_LEVEL as a path name; legacy integers map 0-5 to LOC..SYS."""
    text = value.strip().upper()
    if text.isdecimal():
        return GDR_LEVELS[min(int(text), 4)]
    return text if text in GDR_LEVELS else None


def check_crippling(env: dict[str, str], rdma: bool, needed_gdr: tuple[str, ...]
                    ) -> Iterator[Finding]:
    """Settings that are debugging aids in NCCL's docs and cost bandwidth in production."""
    def on(name: str) -> bool:
        return env.get(name, "").strip() not in ("", "0")

    if on("NCCL_IB_DISABLE"):
        status = Finding.fail if rdma else Finding.warn
        yield status(NODE, "NCCL_IB_DISABLE turns InfiniBand/RoCE off: inter-node traffic "
                     "goes over TCP sockets", env["NCCL_IB_DISABLE"], "unset", FIX)
    if env.get("NCCL_NET", "").strip().lower() == "socket" and rdma:
        yield Finding.fail(NODE, "NCCL_NET=Socket forces TCP sockets on an RDMA node",
                           env["NCCL_NET"], "unset", FIX)
    if on("NCCL_P2P_DISABLE"):
        yield Finding.fail(NODE, "NCCL_P2P_DISABLE turns GPU peer-to-peer (NVLink, PCIe) off",
                           env["NCCL_P2P_DISABLE"], "unset", FIX)
    if on("NCCL_SHM_DISABLE"):
        yield Finding.warn(NODE, "NCCL_SHM_DISABLE turns shared-memory transport off",
                           env["NCCL_SHM_DISABLE"], "unset", FIX)
    if env.get("NCCL_IB_CUDA_SUPPORT", "").strip() == "0":
        yield Finding.fail(NODE, "NCCL_IB_CUDA_SUPPORT=0 turns GPUDirect RDMA off", "0",
                           "unset", FIX)
    for name in ("NCCL_NET_GDR_LEVEL", "NCCL_IB_GDR_LEVEL"):
        if name not in env:
            continue
        level = gdr_level(env[name])
        if level is None:
            yield Finding.fail(NODE, f"{name} is not a path level", env[name],
                               "|".join(GDR_LEVELS), FIX)
        elif level == "LOC":
            yield Finding.fail(NODE, f"{name} turns GPUDirect RDMA off", env[name], "unset", FIX)
        elif needed_gdr and any(GDR_LEVELS.index(level) < GDR_LEVELS.index(d)
                                for d in needed_gdr if d in GDR_LEVELS):
            yield Finding.warn(NODE, f"{name} is below this platform's GPU-NIC distance: "
                               "no GPUDirect RDMA", env[name], list(needed_gdr), FIX)


def validate(info: NcclInfo, env: dict[str, str], rdma: bool, needed_gdr: tuple[str, ...]
             ) -> Iterator[Finding]:
    if "NCCL_IB_HCA" in env:
        yield from check_ib_hca(env["NCCL_IB_HCA"], info.ports)
    if "NCCL_SOCKET_IFNAME" in env:
        yield from check_socket_ifname(env["NCCL_SOCKET_IFNAME"], info.netdevs)
    if "NCCL_TOPO_FILE" in env:
        error = info.topo_files.get(env["NCCL_TOPO_FILE"], "not read")
        if error:
            yield Finding.fail(NODE, "NCCL_TOPO_FILE is missing or not valid XML",
                               {env["NCCL_TOPO_FILE"]: error}, "a readable XML topology", FIX)
    if "NCCL_IB_GID_INDEX" in env and env["NCCL_IB_GID_INDEX"].strip() != "-1":
        yield from check_gid_index(env["NCCL_IB_GID_INDEX"], info.ports, info.version)
    yield from check_crippling(env, rdma, needed_gdr)
