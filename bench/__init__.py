"""Benchmarks (``make bench``): figures printed as ratios against floors measured in the same run."""
