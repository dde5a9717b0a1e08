"""The ``mask`` localizer: an oracle that reads the item's label image."""
