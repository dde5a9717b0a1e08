"""The ``organs``, ``organs+atlas`` and ``auto`` localizers: the shipped organs U-Net, its
trust checks, the atlas it is matched against and the view's sides."""
