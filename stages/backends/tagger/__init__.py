"""Image tags for sight: :mod:`~.effnet` (EfficientNet-Lite0, ImageNet classes beside it)."""
