#!/bin/sh
# Slurm HealthCheckProgram for clusterdiag. slurm.conf:
#   HealthCheckProgram=/etc/slurm/clusterdiag-healthcheck.sh
#   HealthCheckInterval=300
# Drains a failing node; resumes a node once it passes, only if clusterdiag drained it.
# Slurm gives a health check nothing but SLURMD_NODENAME: SLURM_CONF is set here.
#
# Slurm runs it with no PATH and keeps neither stdout nor stderr: every path is absolute,
# and the log lines (one per event, key=value, with job and user) go to the journal
# (identifier clusterdiag-healthcheck), else to /var/log/clusterdiag/healthcheck.log.
# CLUSTERDIAG (the program) and CLUSTERDIAG_LOG (a log file) override the defaults;
# arguments are passed on (Slurm passes none).
SLURM_CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
export SLURM_CONF
CLUSTERDIAG=${CLUSTERDIAG:-/usr/local/bin/clusterdiag}
if [ -n "$CLUSTERDIAG_LOG" ]; then
    exec "$CLUSTERDIAG" healthcheck "$@" 2>>"$CLUSTERDIAG_LOG"
fi
if [ -x /usr/bin/systemd-cat ] && [ -S /run/systemd/journal/stdout ]; then
    exec /usr/bin/systemd-cat -t clusterdiag-healthcheck "$CLUSTERDIAG" healthcheck "$@"
fi
/bin/mkdir -p /var/log/clusterdiag
exec "$CLUSTERDIAG" healthcheck "$@" 2>>/var/log/clusterdiag/healthcheck.log
