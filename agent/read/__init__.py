"""How a node is read: the sources a run is handed (the pynvml module, the filesystem root,
the command runner, ...), the sysfs reader, NVML's library probe and the forked worker that
keeps a hung GPU out of our process. Collectors build on these; nothing here judges."""
