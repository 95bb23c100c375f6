"""Experiments: run directories, result stores and (later) executors for grids of tasks."""
