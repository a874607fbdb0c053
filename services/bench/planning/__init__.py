"""The bench plan: its model, builder and staging; the interleaved rotation, rounds and resume."""
