"""anonymask.models.training.action: the MViTv2-S action classifier and its (private) training.

- ``mvit``: ``build_action_model`` / ``ActionModel`` (``model(x, token_keep=None) -> logits``)
- ``token_masks``: which patch tokens are public (whole patch synthetic)
- ``prefix``: frozen prefix / trainable tail split (for the feature cache)
- ``clips``: ``ClipDataset`` (training clips from a store, pixel masks) and ``make_loader``
- ``feature_cache``: frozen-prefix features of every clip, cached in the store
- ``settings``: ``TrainSettings`` (every setting of a run, typed) and ``Mode``
- ``strategies``: per mode, the adapter to models/training/privacy/mechanism.py (or plain SGD)
- ``trainer``: ``Trainer``; ``run``: one run end to end (data, cache, fit, evaluate, summary)
- ``metrics``; ``bench``; ``synthetic`` (test stores)
"""
