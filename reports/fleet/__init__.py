"""Node reports coming in from many nodes: gathered from their agents over HTTP, through
ClusterShell or srun, or merged from saved files; always hostile input."""
