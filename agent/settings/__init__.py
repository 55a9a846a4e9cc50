"""What the operator configures: the config file, validated and merged over its defaults,
and the site profiles of ``profile_dir``. Below the simulator and the runs that read them."""
