"""The ``unet`` localizer: a U-Net trained by ``radspatial train unet``."""
