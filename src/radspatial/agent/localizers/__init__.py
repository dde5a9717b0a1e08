"""The localizers: what finds the question's structures on the image, one package each,
registered by name in ``radspatial.agent.pipeline.types.LOCALIZERS``: ``markers`` (reads the
drawn marks), ``organs`` (the shipped organs U-Net, with its checks and atlas), ``unet`` (a
U-Net trained by ``train unet``), ``mask`` (an oracle reading the label image) and
``totalsegmentator``."""
