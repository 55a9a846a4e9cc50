"""The bottom layer: what every other layer may use and that uses nothing of ours — exit
codes and error kinds, reading a file someone else may have planted, writing one whole,
the bearer token, host names, lazily compiled patterns, copies of plain data, and text
from elsewhere made inert for a reader."""
