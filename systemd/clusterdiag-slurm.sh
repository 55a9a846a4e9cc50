#!/bin/sh
# Slurm entry points for clusterdiag: one script, installed under three names (links),
# each running the entry point its name says. slurm.conf:
#   Prolog=/etc/slurm/clusterdiag-prolog.sh
#   PrologFlags=Alloc                            (run it for every allocation)
#   SchedulerParameters=nohold_on_prolog_fail    (a requeued job may run elsewhere)
#   Epilog=/etc/slurm/clusterdiag-epilog.sh
#   HealthCheckProgram=/etc/slurm/clusterdiag-healthcheck.sh
#   HealthCheckInterval=300
# prolog: exit 1 only when the node failed a check; it is then drained "clusterdiag: ...".
# epilog: exit 1 and drain when the job left processes on its GPUs (after epilog.grace_s)
#   or an Xid that needs action was logged while it ran.
# healthcheck: drains a failing node; resumes a node once it passes, only if clusterdiag
#   drained it. Slurm gives a health check nothing but SLURMD_NODENAME: SLURM_CONF is set.
#
# Slurm runs these with no PATH and keeps neither stdout nor stderr: every path is
# absolute, and the log lines (one per event, key=value, with job and user) go to the
# journal (identifier clusterdiag-<name>), else to /var/log/clusterdiag/<name>.log.
# CLUSTERDIAG (the program), CLUSTERDIAG_CONFIG (passed as --config when it exists) and
# CLUSTERDIAG_LOG (a log file) override the defaults; the offline bundle's installer writes
# the paths it was given in place of the default program and config (deploy/bundle/
# install.py render_wrapper). Arguments are passed on (Slurm passes none).
#
# A non-zero exit must mean the node failed a check (for a prolog or epilog Slurm drains
# the node on it), so our own trouble must not show as one: a missing program exits 0, a
# log file that cannot be opened falls back to stderr, and a program that cannot run
# (126, 127: a broken interpreter) or exits with anything but 0 or 1 is reported and exits
# 0. fail_closed cannot apply: the program that reads it is what failed.
NAME=${0##*/}
PROGRAM=${NAME#clusterdiag-}
PROGRAM=${PROGRAM%.sh}
CLUSTERDIAG=${CLUSTERDIAG:-/usr/local/bin/clusterdiag}
CONFIG=${CLUSTERDIAG_CONFIG:-/etc/clusterdiag/config.yaml}
LOG=${CLUSTERDIAG_LOG:-/var/log/clusterdiag/$PROGRAM.log}
SLURM_CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
export SLURM_CONF

loud() {
    line="clusterdiag $PROGRAM: ERROR $1; exiting 0 so Slurm does not drain the node for it"
    echo "$line" >&2
    if [ -x /usr/bin/logger ]; then
        /usr/bin/logger -t "clusterdiag-$PROGRAM" -p daemon.err -- "$line" 2>/dev/null
    fi
    { echo "$line" >>"$LOG"; } 2>/dev/null
    exit 0
}

case $PROGRAM in
    prolog|epilog|healthcheck) ;;
    *) LOG=/dev/null; loud "installed as $NAME: name it clusterdiag-prolog.sh, -epilog.sh or -healthcheck.sh" ;;
esac
[ -x "$CLUSTERDIAG" ] || loud "$CLUSTERDIAG is not an executable program"
# Given first, so that a --config among the arguments still wins (click: the last one).
if [ -e "$CONFIG" ]; then set -- --config "$CONFIG" "$@"; fi
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
