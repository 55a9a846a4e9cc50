"""How long a ``--format line`` line may be (line.py): apart from the renderer, so that
the CLI's options, imported by every command and by the agent, can name the limits without
importing the cluster report model and ClusterShell behind it.

node-problem-detector keeps the first ``max_output_length`` bytes of a plugin's output,
80 unless its config says otherwise (kubernetes/node-problem-detector
pkg/custompluginmonitor/types/config.go line 32, ``defaultMaxOutputLength = 80``).
"""

from __future__ import annotations

NPD_MAX_OUTPUT = 80
# The smallest budget a line is written in: room for "NOT READY: " and a cut first problem
# beside "; +99999 more".
MIN_BYTES = 40
