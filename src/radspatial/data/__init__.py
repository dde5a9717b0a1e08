"""Bundled data: label tables, the example CT and its mask, the organ localizer weights, the judge
calibration set (licences in ATTRIBUTION.md)."""
