"""Benchmarks (``make bench``): figures as ratios against floors measured in the same run."""
