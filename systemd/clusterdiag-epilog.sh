#!/bin/sh
# Slurm Epilog for clusterdiag (slurm.conf: Epilog=/etc/slurm/clusterdiag-epilog.sh).
# Exit 1 and drain when the job left processes on its GPUs (after epilog.grace_s) or an
# Xid that needs action was logged while it ran.
#
# Slurm runs it with no PATH and keeps neither stdout nor stderr: every path is absolute,
# and the log lines (one per event, key=value, with job and user) go to the journal
# (identifier clusterdiag-epilog), else to /var/log/clusterdiag/epilog.log.
# CLUSTERDIAG (the program) and CLUSTERDIAG_LOG (a log file) override the defaults;
# arguments are passed on (Slurm passes none).
CLUSTERDIAG=${CLUSTERDIAG:-/usr/local/bin/clusterdiag}
if [ -n "$CLUSTERDIAG_LOG" ]; then
    exec "$CLUSTERDIAG" epilog "$@" 2>>"$CLUSTERDIAG_LOG"
fi
if [ -x /usr/bin/systemd-cat ] && [ -S /run/systemd/journal/stdout ]; then
    exec /usr/bin/systemd-cat -t clusterdiag-epilog "$CLUSTERDIAG" epilog "$@"
fi
/bin/mkdir -p /var/log/clusterdiag
exec "$CLUSTERDIAG" epilog "$@" 2>>/var/log/clusterdiag/epilog.log
