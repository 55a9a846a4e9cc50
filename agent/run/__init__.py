"""One node run end to end: the session made from flags and config, collecting a snapshot
from its sources, judging it with the checks, and the node report; a saved snapshot read
back; the NCCL versions remembered between runs."""
