"""Platform profiles as YAML data (one file each), loaded by clusterdiag.checks.profiles.profile."""
