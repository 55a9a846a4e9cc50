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
#
# A non-zero exit must mean the node failed a check (for a prolog or epilog Slurm drains
# the node on it), so our own trouble must not show as one: a missing program exits 0, a log file that cannot be opened falls back to stderr, and
# a program that cannot run (126, 127: a broken interpreter) or exits with anything but
# 0 or 1 is reported and exits 0. fail_closed cannot apply: the program that reads it is
# what failed.
PROGRAM=prolog
CLUSTERDIAG=${CLUSTERDIAG:-/usr/local/bin/clusterdiag}
LOG=${CLUSTERDIAG_LOG:-/var/log/clusterdiag/$PROGRAM.log}

loud() {
    line="clusterdiag $PROGRAM: ERROR $1; exiting 0 so Slurm does not drain the node for it"
    echo "$line" >&2
    if [ -x /usr/bin/logger ]; then
        /usr/bin/logger -t "clusterdiag-$PROGRAM" -p daemon.err -- "$line" 2>/dev/null
    fi
    { echo "$line" >>"$LOG"; } 2>/dev/null
    exit 0
}

[ -x "$CLUSTERDIAG" ] || loud "$CLUSTERDIAG is not an executable program"
if [ -z "$CLUSTERDIAG_LOG" ] && [ -x /usr/bin/systemd-cat ] \
        && [ -S /run/systemd/journal/stdout ]; then
    /usr/bin/systemd-cat -t "clusterdiag-$PROGRAM" "$CLUSTERDIAG" "$PROGRAM" "$@"
else
    [ -n "$CLUSTERDIAG_LOG" ] || /bin/mkdir -p "${LOG%/*}" 2>/dev/null
    if (: >>"$LOG") 2>/dev/null; then  # a subshell: a failed redirect ends only it
        "$CLUSTERDIAG" "$PROGRAM" "$@" 2>>"$LOG"
    else
        echo "clusterdiag $PROGRAM: cannot write $LOG, logging to stderr" >&2
        "$CLUSTERDIAG" "$PROGRAM" "$@"
    fi
fi
rc=$?
case $rc in
    0|1) exit $rc ;;
    *) loud "$CLUSTERDIAG $PROGRAM exited $rc" ;;
esac
