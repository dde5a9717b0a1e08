"""Benchmarks on disk: generation per case, staging, the dataset layout, the blank-image
ablation, counterfactual cases and exports."""
