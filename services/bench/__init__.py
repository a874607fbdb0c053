"""Bench-runner: serves each cell with vLLM, drives measured load, and records trial results."""
