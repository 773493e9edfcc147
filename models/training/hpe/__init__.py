"""anonymask.models.training.hpe: 2-D human pose estimation under differential privacy (Sivangi et al.).

- model.py: TinyViT backbone (timm) + SimCC coordinate-classification head, targets, decoding.
- data.py: person crops with keypoints from the synthetic dataset's ground truth, splits.
- metrics.py: PCKh@0.5, PCK@0.2 (bbox).
- train.py: strategies frozen / finetune / scratch x modes nonprivate / dpsgd / projdp / featdp /
  fpdp, built on models/training/privacy.
- experiment.py: the strategy x mode x epsilon sweep and its markdown tables
  (``python -m anonymask.models.training.hpe.experiment``).
"""
