"""Training of the agent's localizers (not needed to run them).

``organs_train`` trains the shipped ``organs`` U-Net on the real labelled CT of ../shared
(``organs_data`` reads it; ``organs_loss`` skips unknown pixels; ``organs_init`` warm-starts
from a previous model folder); ``unet_train`` / ``unet_eval`` train and score a ``unet`` model
on a user's own generated dataset (``radspatial agent train``). The runtime package
:mod:`radspatial.agent` imports nothing from here.
"""
