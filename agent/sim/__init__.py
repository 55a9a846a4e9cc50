"""The simulator: replaces the hardware (the pynvml module, the filesystem root, the
command runner), never our code.

Three wings, imported in one direction (tests/test_layering.py keeps it so):

- ``state/``: what a simulated node *is* — its GPUs, links, RDMA devices, PCIe hierarchy,
  NCCL host facts and counters, built healthy from a platform's profile and layout. It
  imports neither of the other wings.
- ``writers/``: turn that state into what the collectors read — the filesystem tree under
  a root, the NVML stand-in (``SimNvml``), command output. They import ``state`` only.
- ``faults/``: the table of fault kinds and the changes each makes to the state. They
  import ``state`` only: a fault changes what the node is, and the writers show it.

The modules at this top level put the wings together: ``node.py`` builds a node from a
spec, writes its tree and hands the collectors a SourceEnv; ``spec.py`` reads simulation
specs; ``schedule.py`` applies faults that come and go; ``cluster.py`` the cluster's view;
``tools.py``/``bandwidth.py``/``tool_main.py`` the active-test tools: a stand-in per tool
that prints what the real one prints (``nccl_tests``, ``nvbandwidth``, ``gpu_burn``,
``perftest``, ``dcgmi``, ``host_tools`` for ibstat, nvidia-smi, which and readlink, with
``toolkit`` and ``tool-texts.yaml`` for what they share), each citing the source lines and
real captures it follows (tests/unit/test_sim_tools_real.py holds them to those).
"""
