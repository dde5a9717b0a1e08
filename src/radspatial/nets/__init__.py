"""The U-Net, below both the agent (which runs it: the unet and organs localizers) and
``training/`` (which trains it): its definition (``unet_torch``, MONAI's ``UNet`` in
``unet``), its folder's config (``unet_config``), loading and prediction (``unet``) and the
fused inference path (``unet_fast``)."""
