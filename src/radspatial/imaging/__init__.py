"""Imaging: volumes in canonical orientation, axial slices and their 8 variants, markers."""
