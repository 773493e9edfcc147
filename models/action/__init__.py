"""anonymask.models.action: the MViTv2-S action classifier and its (private) training.

- ``mvit``: ``build_action_model`` / ``ActionModel`` (``model(x, token_keep=None) -> logits``)
- ``token_masks``: which patch tokens are public (whole patch synthetic)
- ``prefix``: frozen prefix / trainable tail split (for the feature cache)
- ``strategies``: gradient strategies per mode (nonprivate, dpsgd, maskdp, fpdp)
- ``trainer``: ``Trainer`` + ``TrainConfig``; ``metrics``; ``bench``; ``synthetic`` (test stores)
"""
