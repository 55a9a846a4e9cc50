"""What a simulated node shows: its state written as the files the collectors read, the
NVML stand-in's answers and command output. Imports the state, never the faults."""
