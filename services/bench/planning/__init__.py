"""The plan: cells, launches, the interleaved rotation, rounds and resume."""
