"""What a simulated node is: its hardware and host facts, built healthy from a platform's
profile and layout and then changed by faults. Imports neither writers nor faults."""
