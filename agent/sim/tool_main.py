"""A simulated tool as a program, for a real launcher: ``python -m clusterdiag.agent.sim.
tool_main all_reduce_perf -b 1G ...`` prints what the stand-in in tools.py prints for the
node it runs on. Under ``srun`` that node is ``SLURMD_NODENAME`` (the slurmd's name, one
per simulated node on one machine). A step over several nodes (``SLURM_STEP_NUM_NODES``
> 1) is one nccl-tests job: with an MPI build (the default) its rank 0 (``SLURM_PROCID``)
prints the table over ``SLURM_STEP_NODELIST`` and the others print nothing, as nccl-tests'
ranks do; without one (fault ``nccl_tests_no_mpi``) every task prints its own node's run.
The cluster is the spec file ``CLUSTERDIAG_SIM_SPEC`` names (noise seed
``CLUSTERDIAG_SIM_SEED``); an ib_write_bw server and its client, two processes, meet in a
folder of that spec's (tools.py ``rendezvous_folder``).

The integration test under a real Slurm (tests/integration/test_slurm.py) puts one small
wrapper per tool name on PATH; ``clusterdiag qualify`` launches them with ``srun`` exactly
as it launches the real tools.
"""

from __future__ import annotations

import os
import socket
import sys

from ..model.nodeset import expand
from .tools import rendezvous_folder, simulated_cluster


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m clusterdiag.agent.sim.tool_main PROGRAM [ARG...]",
              file=sys.stderr)
        return 2
    spec = os.environ.get("CLUSTERDIAG_SIM_SPEC")
    if not spec:
        print("CLUSTERDIAG_SIM_SPEC is not set (the simulation spec file)", file=sys.stderr)
        return 2
    nodes, tools = simulated_cluster(spec, int(os.environ.get("CLUSTERDIAG_SIM_SEED", "0")),
                                     rendezvous_folder(spec))
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    env = dict(os.environ)
    if int(os.environ.get("SLURM_STEP_NUM_NODES", "1")) > 1:
        step = expand(os.environ.get("SLURM_STEP_NODELIST", node))
        mpi = all(nodes[n].nccl_tests_mpi for n in step if n in nodes)
        if mpi and os.environ.get("SLURM_PROCID", "0") != "0":
            return 0
        result = tools.group(step, argv, env, 3600.0) if mpi else tools(node, argv, env,
                                                                         3600.0)
    else:
        result = tools(node, argv, env, 3600.0)
    if result.error is not None:
        print(f"{argv[0]}: {result.error}", file=sys.stderr)
        return 127
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
