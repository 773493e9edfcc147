"""Skeleton motion anonymization (Moon et al.): anonymizers, action/privacy classifiers, minimax
training and its evaluation. Pure torch/numpy; no Prefect, no store I/O.

Data: sequences (T, J, 3) float32 in metres, batches (B, T, J, 3); J = 25 (NTU Kinect joints),
22 (SMPL-H body joints) or 52 (SMPL-H with fingers). See :mod:`.data` for the conventions.

Modules:
- :mod:`.graphs` kinematic trees (NTU25, SMPL22, SMPLH52), adjacency, bone-length retargeting
- :mod:`.data` normalisation (invertible), fixed-length windows, datasets, splits, NTU loader
- :mod:`.anonymizers` ResidualMLPAnonymizer, UNetAnonymizer, anonymize_track for the pipeline
- :mod:`.classifiers` SkeletonClassifier (ST-GCN-style) for actions, re-identification, gender
- :mod:`.adversarial` pretrain_classifier, anonymizer_loss, AdversarialTrainer
- :mod:`.evaluate` evaluate_anonymized, run_skeleton_experiment, results_table_markdown, plot_tradeoff
- :mod:`.synthetic` synthetic subjects/actions with known identities and genders
"""
