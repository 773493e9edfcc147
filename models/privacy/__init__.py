"""anonymask.models.privacy: private training pieces, generic over any token-masking model.

accountant  epsilon / sigma_for_epsilon / composed_epsilon / Accountant (RDP own, PLD, PRV)
sampler     PoissonBatchSampler, collate_allowing_empty
clipping    per-sample gradients (torch.func), flat clipping, Gaussian noise
dpsgd       OpacusDPSGD (Opacus) and dpsgd_gradients (reference)
maskdp      maskdp_gradients, MaskDPOptimizerStep
fpdp        gaussian_blur_video, PublicSubspace, fpdp_gradients, FPDPOptimizerStep
report      PrivacyReport, dataset_fingerprint
bench       bench_steps
toy         TinyTokenVideoModel (reference of the ``model(x, token_keep=None)`` interface)
Nothing is imported here, so ``import anonymask.models.privacy.accountant`` stays light.
"""
