"""The simulator: replaces the hardware (the pynvml module, the filesystem root), never our code."""
