"""The ``markers`` localizer: the numbers, letters and dots drawn on the image, read from
their pixels."""
