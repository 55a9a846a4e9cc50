#!/bin/sh
# Slurm Prolog for clusterdiag. slurm.conf:
#   Prolog=/etc/slurm/clusterdiag-prolog.sh
#   PrologFlags=Alloc                            (run it for every allocation)
#   SchedulerParameters=nohold_on_prolog_fail    (a requeued job may run elsewhere)
# Exit 1 only when the node failed a check; it is then drained "clusterdiag: ...".
#
# Slurm runs it with no PATH and keeps neither stdout nor stderr: every path is absolute,
# and the log lines (one per event, key=value, with job and user) go to the journal
# (identifier clusterdiag-prolog), else to /var/log/clusterdiag/prolog.log.
# CLUSTERDIAG (the program) and CLUSTERDIAG_LOG (a log file) override the defaults;
# arguments are passed on (Slurm passes none).
CLUSTERDIAG=${CLUSTERDIAG:-/usr/local/bin/clusterdiag}
if [ -n "$CLUSTERDIAG_LOG" ]; then
    exec "$CLUSTERDIAG" prolog "$@" 2>>"$CLUSTERDIAG_LOG"
fi
if [ -x /usr/bin/systemd-cat ] && [ -S /run/systemd/journal/stdout ]; then
    exec /usr/bin/systemd-cat -t clusterdiag-prolog "$CLUSTERDIAG" prolog "$@"
fi
/bin/mkdir -p /var/log/clusterdiag
exec "$CLUSTERDIAG" prolog "$@" 2>>/var/log/clusterdiag/prolog.log
