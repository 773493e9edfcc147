"""Synthetic dataset with ground truth: identities performing real motion-capture clips on photos.

It is the project's demo data and the test bed of every metric: each video comes with the exact
masks, SMPL-H parameters, joints and clean background it was made from.
"""
