"""anonymask.models.training.privacy: private training pieces, generic over any token-masking model.

accountant  epsilon / sigma_for_epsilon / composed_epsilon / Accountant (RDP own, PLD, PRV;
            add/remove and replace-one adjacency), revealed_sampling_epsilon
sampler     PoissonBatchSampler (per sample or per record), collate_allowing_empty, os_seed
clipping    per-sample gradients (torch.func), flat clipping, Gaussian noise
dpsgd       private_noisy_sum, OpacusDPSGD (Opacus) and dpsgd_gradients (reference)
mechanism   PrivateStep: the one implementation of DP-SGD, MaskDP-SGD, FP-DP, PDP-SGD, feature DP
fpdp        psi (gaussian_blur_video, the blur floor), PublicSubspace
report      PrivacyReport (states adjacency, accounting, guarantee), dataset_fingerprint
bench       bench_steps
toy         TinyTokenVideoModel (reference of the ``model(x, token_keep=None)`` interface)
Nothing is imported here, so ``import anonymask.models.training.privacy.accountant`` stays light.
"""
