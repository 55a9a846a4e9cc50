"""``dcgmi diag -r <level|tests> -j`` as DCGM 4 prints it (NVIDIA/DCGM @ 72fa3fe, "DCGM
4.6.0"): the document Diag::HelperJsonBuildOutput builds (dcgmi/Diag.cpp:1237-1289, key
names nvvs/include/NvvsJsonStrings.h:20-53) — ``DCGM Diagnostic`` with its
``test_categories``, each test's per-GPU ``results`` and ``test_summary``, then
``entity_groups`` (Diag.cpp:1149-1181) and ``metadata`` (Diag.cpp:1183-1214) — written by
``Json::Value::toStyledString()`` (Diag.cpp:1303) of the bundled jsoncpp 1.9.6
(dcgmbuild/.../urls.txt): BuiltStyledStreamWriter with its defaults, members sorted by
name (a std::map), tab indentation, ``" : "`` between a name and its value, every array
on lines of its own (commentStyle All), json_writer.cpp ``BuiltStyledStreamWriter``. The
``info`` lines of the FP64 ``diagnostic`` test are those of a real DCGM 4 run (NVIDIA/DCGM#215,
in the shared real-data set as capture 20 B).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from . import bandwidth as bw
from .state.hardware import SimNode
from .toolkit import NotModelled, Printed

DCGM_VERSION = "4.2.3"
JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


class _Styled:
    """jsoncpp's BuiltStyledStreamWriter (json_writer.cpp) with toStyledString's settings:
    indentation "\\t", commentStyle All (so every non-empty array is written one item a
    line), colon " : "; ``indented`` is its flag of the same name."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.indent = ""
        self.indented = True

    def write_indent(self) -> None:
        self.out.append("\n" + self.indent)

    def with_indent(self, text: str) -> None:
        if not self.indented:
            self.write_indent()
        self.out.append(text)
        self.indented = False

    def value(self, item: JsonValue) -> None:
        if isinstance(item, dict) and item:
            self.with_indent("{")
            self.indent += "\t"
            names = sorted(item, key=lambda n: n.encode())  # a std::map: byte order
            for i, name in enumerate(names):
                self.with_indent(json.dumps(name))
                self.out.append(" : ")
                self.value(item[name])
                if i < len(names) - 1:
                    self.out.append(",")
            self.indent = self.indent[:-1]
            self.with_indent("}")
        elif isinstance(item, list) and item:
            self.with_indent("[")
            self.indent += "\t"
            for i, child in enumerate(item):
                if not self.indented:
                    self.write_indent()
                self.indented = True
                self.value(child)
                self.indented = False
                if i < len(item) - 1:
                    self.out.append(",")
            self.indent = self.indent[:-1]
            self.with_indent("]")
        else:
            self.out.append("{}" if isinstance(item, dict) else "[]" if isinstance(item, list)
                            else json.dumps(item))


def styled(value: JsonValue) -> str:
    """``Json::Value::toStyledString()``: the styled writer's text and a newline."""
    writer = _Styled()
    writer.value(value)
    return "".join(writer.out) + "\n"


def run(node: SimNode, argv: list[str], noise: Callable[..., float]) -> Printed:
    """``dcgmi diag -r <1-4|diagnostic> -j``: software, pcie (its bandwidth info lines)
    and, at level 3+ or ``-r diagnostic``, the FP64 GEMM test with the Gflop/s it reached."""
    if argv[1:2] != ["diag"] or "-j" not in argv or "-r" not in argv:
        raise NotModelled(f"dcgmi {' '.join(argv[1:])} is not simulated")
    level = argv[argv.index("-r") + 1] if argv.index("-r") + 1 < len(argv) else ""
    if level not in ("1", "2", "3", "4", "diagnostic"):
        raise NotModelled(f"dcgmi diag -r {level} is not simulated")

    def result(index: int, info: list[str] | None = None, test: str = "") -> JsonValue:
        entry: dict[str, JsonValue] = {"entity_group": "GPU", "entity_group_id": 1,
                                       "entity_id": index, "status": "Pass"}
        if info is not None:
            entry["info"] = list[JsonValue](info)
        failing = node.dcgm_failing.get((test, index))
        if failing is not None:  # a result's "warnings": error_id and text (NvvsJsonStrings.h)
            entry["status"] = "Fail"
            entry["warnings"] = [{"error_id": failing[0], "warning": failing[1]}]
        return entry

    # Each test in its plugin's category (nvvs/include/PluginStrings.h:41-60: software
    # Deployment, pcie Integration; DiagnosticPlugin.cpp:99: diagnostic Hardware).
    categories: list[JsonValue] = [{"category": "Deployment", "tests": [
        {"name": "software", "results": [result(0)], "test_summary": {"status": "Pass"}}]}]

    def per_gpu(name: str, info: Callable[[int], list[str]]) -> JsonValue:
        failed = any(test == name for test, _ in node.dcgm_failing)
        return {"name": name,
                "results": [result(g.index, info(g.index), name) for g in node.gpus],
                "test_summary": {"status": "Fail" if failed else "Pass"}}

    if level not in ("1", "diagnostic"):
        categories.append({"category": "Integration", "tests": [per_gpu("pcie", lambda i: [
            f"GPU {i} GPU to Host bandwidth:\t\t{bw.host_link(node, i) * 0.9:.2f} GB/s",
            f"GPU {i} Host to GPU bandwidth:\t\t{bw.host_link(node, i) * 0.9:.2f} GB/s"])]})
    if level in ("3", "4", "diagnostic"):
        def gemm(i: int) -> list[str]:
            gpu = node.gpus[i]
            free = gpu.memory_bytes - (gpu.memory_bytes >> 4)
            return [f"Allocated space for {free // (550 << 20)} output matricies from {free} "
                    "bytes available.", "Running with precisions: FP64 1, FP32 1, FP16 1",
                    f"GPU {i} calculated at approximately "
                    f"{bw.gpu_gflops(node, i) * noise('dcgm', i):.2f} gigaflops during this "
                    "test"]
        categories.append({"category": "Hardware", "tests": [per_gpu("diagnostic", gemm)]})
    document: JsonValue = {
        "DCGM Diagnostic": {"test_categories": categories},
        "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [
            {"entity_id": g.index, "serial_num": g.serial,
             "device_id": f"{node.layout.gpu_device_id:04x}"} for g in node.gpus]}],
        "metadata": {"version": DCGM_VERSION, "Driver Version Detected": node.driver_version}}
    return Printed(styled(document))
