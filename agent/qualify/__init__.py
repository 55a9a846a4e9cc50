"""``clusterdiag qualify``: the active half — run the standard tools on every node, or read
what they printed, and judge the figures against the profile and against the node's peers.

``parsers`` read each tool's output into ``model.qualify.ToolRun``; ``plan`` says which
tool runs for which test with which arguments and deadline; ``launch`` wraps a command for
the node it runs on (local, srun, ssh); ``run`` drives a whole qualification; ``logs``
judges saved outputs; ``baseline`` and ``drain`` are what happens after the verdict. The
judging itself is in ``checks/qualify/judge.py``, the report in ``reports/model/qualify.py``.
"""
