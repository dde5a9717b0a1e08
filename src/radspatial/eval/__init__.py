"""Evaluation: items, prompts, runs with resume, scoring, metrics, MIRP's protocol and reports."""
