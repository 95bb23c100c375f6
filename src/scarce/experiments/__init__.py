"""Experiments: settings and presets (settings), run directories (store), where tasks run (executors),
one run of stages over them (run), and chunked Monte Carlo ground truth (montecarlo)."""
