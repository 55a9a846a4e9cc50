"""The report formats as data: the node report, its folded summary for the cluster view, the
facts cross-node checks read, the cluster report and the qualification report."""
