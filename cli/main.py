"""`anonymask` command line: one entry point over the same code the Prefect flows run.

Every subcommand imports its heavy dependencies lazily so `anonymask status` stays quick.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from anonymask.core.errors import AnonymaskError
from anonymask.core.paths import data_root

#: exit codes of ``anonymize`` and ``verify``: all fine / some videos failed or damage found /
#: the command could not run at all (bad arguments, missing store or dataset)
EXIT_OK = 0
EXIT_SOME_FAILED = 1
EXIT_COULD_NOT_RUN = 2


# ---------------------------------------------------------------------------- status / verify
def cmd_status(args: argparse.Namespace) -> int:
    from anonymask.storage.inspect import format_status_table, status_report
    from anonymask.storage.store import DatasetStore

    report = status_report(DatasetStore.open(args.store, mode="r"))
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_status_table(report))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0: no damage (or all of it repaired); 1: damage found (or left after repair)."""
    from anonymask.storage.inspect import verify_store
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.common import stage_deps

    deps = stage_deps()
    store = DatasetStore.open(args.store, mode="r+" if args.repair else "r")
    res = verify_store(store, deps=deps)
    _print_verify(res, args.json and not args.repair)
    if not args.repair or res.ok:
        return 0 if res.ok else EXIT_SOME_FAILED
    from anonymask.cli.prefect_startup import prepare_database

    prepare_database()
    from anonymask.core.runlog import run_log
    from anonymask.flows.repair import repair_store

    with run_log("repair", args.log_dir) as log_path:
        report = repair_store(args.store, res)
    if report.get("summary"):
        report["summary"]["log"] = str(log_path)
    for vid, marked in report["marked"].items():
        print(f"repair  {vid}: {'; '.join(marked) or 'nothing to mark'}")
    summary = report.get("summary")
    if summary:
        _print_run_summary(summary)
    after = verify_store(DatasetStore.open(args.store, mode="r"), deps=deps)
    print("after repair:")
    _print_verify(after, args.json)
    unrepaired = summary["failed"] if summary else 0
    if unrepaired:
        print(f"NOT REPAIRED: {unrepaired} video(s) failed to recompute (see FAILED above)")
    return 0 if after.ok and not unrepaired else EXIT_SOME_FAILED


def _print_verify(res, as_json: bool) -> None:
    if as_json:
        print(json.dumps(res.to_dict(), indent=2))
        return
    for line in res.damaged:
        print(f"DAMAGED  {line}")
    for line in res.incomplete:
        print(f"incomplete  {line}")
    verdict = "OK" if res.ok else f"DAMAGE FOUND ({len(res.damaged)})"
    print(f"{verdict}: {res.checked_arrays} arrays checked, {len(res.incomplete)} incomplete stage(s)")


def cmd_preview(args: argparse.Namespace) -> int:
    from anonymask.cli.preview import write_preview
    from anonymask.storage.store import DatasetStore

    store = DatasetStore.open(args.store, mode="r")
    out = Path(args.out) if args.out else data_root() / "preview" / store.dataset
    videos = [v for v in (args.videos or "").split(",") if v] or None
    try:
        page = write_preview(store, out, frames_per_video=args.frames, videos=videos,
                             limit=None if args.limit == 0 else args.limit)
    except KeyError as e:
        print(f"preview: {args.store}: {e.args[0]}", file=sys.stderr)
        return 2
    print(page)
    return 0


def cmd_anonymize(args: argparse.Namespace) -> int:
    """Exit 0: every video done or already complete; 1: some videos failed (each printed with its
    stage and reason); 2: the run could not start (bad arguments, unreadable dataset or store)."""
    from anonymask.config.pipeline import parse_overrides, pipeline_config
    from anonymask.config.presets import with_presets

    overrides = with_presets(args.preset, parse_overrides(args.set))
    cfg = pipeline_config(args.dataset, overrides)  # a bad setting is one line, before Prefect, a server or a store
    from anonymask.config.stages import check_weights

    check_weights(cfg)  # a missing weight file too (MissingWeightsError), before any video is touched
    from anonymask.core.paths import default_source, default_store
    from anonymask.storage.preflight import check_run_target

    check_run_target(args.dataset, args.source or str(default_source(args.dataset)),
                     args.store or str(default_store(args.dataset)))  # dataset, source, store: before Prefect
    if args.videos:
        _check_video_ids(args.dataset, args.source, args.videos)
    from anonymask.cli.prefect_startup import prepare_database

    prepare_database()
    from anonymask.flows.anonymize import anonymize

    runner_overrides = {k: v for k, v in (("video_memory_gb", args.video_memory_gb),
                                          ("video_timeout_s", args.video_timeout_s)) if v is not None}
    state = anonymize(
        dataset=args.dataset,
        source=args.source,
        store=args.store,
        overrides=overrides,
        limit=args.limit,
        video_ids=args.videos,
        runner=args.runner,
        workers=args.workers,
        verify_done=not args.no_verify_done,
        runner_overrides=runner_overrides,
        log_dir=args.log_dir,
        export_to=args.export_to,
        return_state=True,
    )
    summary = _summary_of(state)
    if summary is None:
        print(f"anonymask: error: the run could not start: {_state_error(state)}", file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    _print_run_summary(summary, args.dataset)
    return EXIT_SOME_FAILED if summary["failed"] else EXIT_OK


def _check_video_ids(dataset: str, source: str | None, wanted: list[str]) -> None:
    """Unknown ``--videos`` ids are one line before any work (the flow checks again)."""
    from anonymask.core.paths import default_source
    from anonymask.storage.datasets import check_video_ids, get_adapter

    adapter = get_adapter(dataset, source or str(default_source(dataset)))
    check_video_ids(dataset, {info.video_id for info in adapter.records()}, wanted)


def _summary_of(state) -> dict | None:
    try:
        res = state.result(raise_on_failure=False)
    except Exception:
        return None
    return res if isinstance(res, dict) and "videos" in res else None


def _state_error(state) -> str:
    try:
        state.result(raise_on_failure=True)
    except Exception as e:
        return str(e) if isinstance(e, AnonymaskError) else f"{type(e).__name__}: {e}"
    return state.message or state.name


def _print_run_summary(s: dict, dataset: str = "") -> None:
    head = f"anonymize {dataset}: " if dataset else "anonymize: "
    print(f"{head}{s['done']} done, {s['skipped']} skipped (already complete), {s['failed']} failed "
          f"of {s['videos']} videos; {s['frames']} frames in {s['seconds']:.1f} s "
          f"({s['frames_per_s']:.2f} frames/s)")
    for f in s.get("failures", []):
        print(f"FAILED  {f['video']}  {f['stage'] or '?'}: {f['error']}")
    for r in s.get("repaired", []):
        print(f"repaired  {r['video']}: {r['what']}")
    if s.get("waited"):
        print(f"waited for another run holding: {', '.join(s['waited'])}")
    if s.get("export"):
        e = s["export"]
        print(f"export: {e['written']} written, {e['unchanged']} unchanged, {e['excluded']} not exported, "
              f"{e['errors']} failed -> {e['out']}")
    if s.get("log"):
        print(f"log: {s['log']}")


# ---------------------------------------------------------------------------- export
def cmd_export(args: argparse.Namespace) -> int:
    """Exit 0: every publishable video exported or already up to date (videos not done or whose
    audit failed are listed, never exported); 1: writing some video failed; 2: could not run."""
    from anonymask.storage.export import ExportOptions, export_store

    opts = ExportOptions(lossless=args.lossless, with_masks=args.with_masks, crf=args.crf)
    res = export_store(args.store, args.out, opts, videos=args.videos or None, log=print)
    print(f"export: {len(res['written'])} written, {len(res['unchanged'])} unchanged, "
          f"{len(res['excluded'])} not exported (not done or audit failed), {len(res['errors'])} failed; "
          f"manifest: {res['manifest']}")
    return EXIT_SOME_FAILED if res["errors"] else EXIT_OK


def cmd_verify_export(args: argparse.Namespace) -> int:
    """Exit 0: every file matches the manifest; 1: a file is missing, differs or is not listed."""
    from anonymask.storage.export import verify_export

    res = verify_export(args.dir)
    for line in res["problems"]:
        print(f"MISMATCH  {line}")
    print(("OK" if res["ok"] else f"MISMATCH ({len(res['problems'])})") + f": {res['checked']} file(s) checked")
    return EXIT_OK if res["ok"] else EXIT_SOME_FAILED


# ---------------------------------------------------------------------------- privacy
class OneLineParser(argparse.ArgumentParser):
    """Argument errors as one line on stderr and exit code 2 (no usage dump, no traceback)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _privacy_args_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the numbers, checked before any accountant runs (NaN and inf included)."""
    import math

    if not 0 < args.q <= 1:
        return f"--q must be in (0, 1], got {args.q}"
    if args.steps < 1:
        return f"--steps must be >= 1, got {args.steps}"
    if not 0 < args.delta < 1:
        return f"--delta must be in (0, 1), got {args.delta}"
    if args.what == "epsilon" and not (math.isfinite(args.sigma) and args.sigma > 0):
        return f"--sigma must be a finite number > 0, got {args.sigma}"
    if args.what == "sigma" and not (math.isfinite(args.epsilon) and args.epsilon > 0):
        return f"--epsilon must be a finite number > 0, got {args.epsilon}"
    if args.accountant == "prv" and args.adjacency != "add_remove":
        return "--accountant prv supports --adjacency add_remove only (use pld or rdp)"
    if args.same_batch and (args.what != "epsilon"):
        return "--same-batch applies to `privacy epsilon` only"
    return None


def cmd_privacy_compare(args: argparse.Namespace) -> int:
    import math

    from anonymask.models.training.privacy.compare import bound_comparison, comparison_markdown

    bad = [e for e in args.epsilons if not (math.isfinite(e) and e > 0)]
    problem = (
        f"--q must be in (0, 1], got {args.q}" if not 0 < args.q <= 1
        else f"--steps must be >= 1, got {args.steps}" if args.steps < 1
        else f"--delta must be in (0, 1), got {args.delta}" if not 0 < args.delta < 1
        else f"--epsilons must be finite numbers > 0, got {bad}" if bad
        else None
    )  # fmt: skip
    if problem:
        print(f"anonymask privacy compare: error: {problem}", file=sys.stderr)
        return 2
    rows = bound_comparison(args.q, args.steps, args.delta, args.epsilons)
    print(json.dumps(rows, indent=2) if args.json else comparison_markdown(rows), end="" if not args.json else "\n")
    return 0


def cmd_privacy(args: argparse.Namespace) -> int:
    from anonymask.models.training.privacy import accountant as acc

    problem = _privacy_args_error(args)
    if problem:
        print(f"anonymask privacy {args.what}: error: {problem}", file=sys.stderr)
        return 2
    common = {"q": args.q, "steps": args.steps, "delta": args.delta, "adjacency": args.adjacency}
    if args.what == "epsilon" and args.same_batch:
        eps = acc.revealed_sampling_epsilon(args.q, args.sigma, args.steps, args.delta, args.adjacency)
        out = {"epsilon": eps, "sigma": args.sigma, **common, "accountant": "gdp-revealed-sampling",
               "mechanism": "public term on the private batch (sampling revealed, no amplification)"}
    elif args.what == "epsilon":
        eps = acc.epsilon(args.q, args.sigma, args.steps, args.delta, args.accountant, args.adjacency)
        out = {"epsilon": eps, "sigma": args.sigma, **common, "accountant": args.accountant}
    else:
        sigma = acc.sigma_for_epsilon(args.q, args.steps, args.epsilon, args.delta, args.accountant,
                                      adjacency=args.adjacency)  # fmt: skip
        out = {"sigma": sigma, "epsilon": args.epsilon, **common, "accountant": args.accountant}
    if args.json:
        print(json.dumps(out))
    else:
        print("  ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in out.items()))
    return 0


def cmd_privacy_audit(args: argparse.Namespace) -> int:
    from anonymask.cli.privacy_audit import audit_lines

    if not Path(args.run_dir).is_dir():
        print(f"anonymask privacy audit: error: {args.run_dir} is not a run folder", file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    lines, ok = audit_lines(args.run_dir)
    print("\n".join(lines))
    print("audit: " + ("all checks passed" if ok else f"{sum(not ln.startswith('PASS') for ln in lines)} check(s) failed"))
    return EXIT_OK if ok else EXIT_SOME_FAILED


# ---------------------------------------------------------------------------- demo data
def cmd_generate(args: argparse.Namespace) -> int:
    from anonymask.models.shared.synthetic.generator import generate_demo

    root = Path(args.root) if args.root else data_root() / "raw" / args.preset
    path = generate_demo(root, preset=args.preset, seed=args.seed)
    print(f"generated {args.preset} dataset at {path}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from anonymask.cli.demo import run_demo

    return run_demo(root=data_root(), anonymize=not args.no_anonymize, seed=args.seed)


def cmd_bench(args: argparse.Namespace) -> int:
    if args.gpu:  # `make gpu-check`: the CUDA install checked and measured (bench/gpu_check.py)
        from anonymask.bench.gpu_check import main as gpu_check

        return gpu_check((["--tiny"] if args.quick else []) + (["--out", args.gpu_out] if args.gpu_out else []))
    from anonymask.bench.harness import run_benchmarks

    return run_benchmarks(out_dir=Path(args.out), only=args.only, quick=args.quick)


# ---------------------------------------------------------------------------- training
def cmd_train(args: argparse.Namespace) -> int:
    from anonymask.config.pipeline import parse_overrides
    from anonymask.config.training import SettingsError, train_settings
    from anonymask.flows.train import train

    try:  # checked before the flow starts: a typo is one line, not a failed run
        overrides = parse_overrides(args.set)
        train_settings(args.mode, args.dataset, epsilon=args.epsilon, variant=args.variant,
                       mask_source=args.mask_source, overrides=overrides)  # fmt: skip
    except (SettingsError, ValueError) as err:
        print(f"anonymask train: error: {err}", file=sys.stderr)
        return 2
    from anonymask.cli.prefect_startup import prepare_database

    prepare_database()
    state = train(
        mode=args.mode, dataset=args.dataset, store=args.store, epsilon=args.epsilon, variant=args.variant,
        mask_source=args.mask_source, overrides=overrides, run_name=args.run_name,
        runs_dir=args.runs_dir, until_epoch=args.until_epoch, progress_bar=not args.no_progress,
        return_state=True,
    )  # fmt: skip
    if not state.is_completed():
        print(f"{state.name}: {state.message}", file=sys.stderr)
        return 1
    res = state.result()
    m = res["metrics"]
    eps = m["epsilon"]
    print(f"{res['run']}: top-1 {m['top1']:.4f}  mean per-class {m['mean_class_acc']:.4f}  "
          f"epsilon {eps if isinstance(eps, str) else format(eps, '.4g')} ({m['accountant']})")
    print(f"run folder: {res['run_dir']}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from anonymask.cli.report import write_report

    out = Path(args.out) if args.out else Path(args.runs_dir) / "report"
    res = write_report(args.runs_dir, out, metric=args.metric, include_incomplete=args.include_incomplete)
    for dataset, files in res["datasets"].items():
        print(files["table"])
        print(f"{dataset}: {files['csv']}  {files['markdown']}  {files['plot']}")
    print(f"{res['runs']} runs: {res['runs_csv']}")
    return 0


def cmd_train_skeleton_anon(args: argparse.Namespace) -> int:
    from anonymask.cli.prefect_startup import prepare_database

    prepare_database()
    from anonymask.flows.skeleton import train_skeleton_anon

    res = train_skeleton_anon(dataset=args.dataset, source=args.source, store=args.store, out=args.out,
                              alphas=args.alphas, betas=args.betas, epochs=args.epochs,
                              adv_epochs=args.adv_epochs, anonymizer=args.anonymizer, device=args.device)
    print(json.dumps(res, indent=2, default=str))
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    """The effective settings: a training run's (``--train MODE``) or the anonymization pipeline's."""
    from anonymask.config.pipeline import parse_overrides

    try:
        overrides = parse_overrides(args.set)
        if args.train:
            if args.preset:
                raise ValueError("--preset names anonymization settings; a training run (--train) has none")
            from anonymask.config.training import train_settings

            data = train_settings(args.train, args.dataset, overrides=overrides).to_json_dict()
        else:
            from anonymask.config.pipeline import pipeline_config
            from anonymask.config.presets import with_presets

            data = pipeline_config(args.dataset, with_presets(args.preset, overrides))
    except (AnonymaskError, ValueError) as err:
        print(f"anonymask config show: error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(data, indent=2, default=str))
    return 0


def cmd_config_presets(args: argparse.Namespace) -> int:
    """The named presets (``--preset NAME``): what each turns on, the settings it sets, its terms."""
    from anonymask.config.presets import describe_presets

    print(describe_presets())
    return 0


def cmd_config_backends(args: argparse.Namespace) -> int:
    """Every registered stage backend: what it is, where its weights come from, its settings."""
    from anonymask.core import registry

    kinds = [args.kind] if args.kind else sorted(registry.DECLARED_IN)
    for kind in kinds:
        for name, be in sorted(registry.backends(kind).items()):
            where = f"weights: $ANONYMASK_WEIGHTS/{be.weights}" if be.weights else "offline"
            print(f"{kind}.{name}  ({where})  {be.summary}")
            for key, default, about in _settings_lines(be.settings):
                print(f"    {key} = {default!r}" + (f"  # {about}" if about else ""))
    return 0


def _settings_lines(model, prefix: str = ""):
    """(dotted key, default, description) of every setting, nested settings trees flattened."""
    from pydantic import BaseModel

    for key, field in model.model_fields.items():
        if isinstance(field.default, BaseModel):
            yield from _settings_lines(type(field.default), f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", field.default, field.description or ""


PRESET_HELP = "a named set of settings, under any --set (list: anonymask config presets)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="anonymask", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("config", help="the effective settings of a dataset's pipeline or of a training run")
    csub = s.add_subparsers(dest="what", required=True, parser_class=OneLineParser)
    c = csub.add_parser("show", prog="anonymask config show")
    c.add_argument("--dataset", default="demo")
    c.add_argument("--train", default=None, metavar="MODE", help="a training run's settings (nonprivate, dp, maskdp, fpdp)")
    c.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    c.add_argument("--preset", action="append", default=[], metavar="NAME", help=PRESET_HELP)
    c.set_defaults(func=cmd_config_show)
    c = csub.add_parser("presets", prog="anonymask config presets")
    c.set_defaults(func=cmd_config_presets)
    c = csub.add_parser("backends", prog="anonymask config backends")
    c.add_argument("kind", nargs="?", default=None, help="pose4d, person_detector, segment, inpaint, refine, "
                                                          "conditions or audit (default: all)")
    c.set_defaults(func=cmd_config_backends)

    s = sub.add_parser("status", help="table of videos x stages (done / failed with reason / missing)")
    s.add_argument("store", help="store path or fsspec URL")
    s.add_argument("--json", action="store_true", help="one JSON document, with per-video metrics")
    s.set_defaults(func=cmd_status)

    s = sub.add_parser("verify", help="check every video group, record and complete stage's arrays "
                                      "(exit 1 on damage); --repair recomputes what is damaged")
    s.add_argument("store")
    s.add_argument("--json", action="store_true")
    s.add_argument("--repair", action="store_true",
                   help="mark damaged stages and their dependants stale and recompute them")
    s.add_argument("--log-dir", default=None, help="run log folder (default $ANONYMASK_DATA/logs)")
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser("preview", help="HTML page: original vs anonymized frames, masks, metrics")
    s.add_argument("store")
    s.add_argument("--out", default=None, help="output folder (default $ANONYMASK_DATA/preview/<dataset>)")
    s.add_argument("--frames", type=int, default=4, help="frames shown per video (an audit's findings first)")
    s.add_argument("--videos", default=None, help="comma-separated video ids to show (default: failed first)")
    s.add_argument("--limit", type=int, default=50, help="most videos shown when --videos is not given (0: all)")
    s.set_defaults(func=cmd_preview)

    s = sub.add_parser("export", help="one mp4 per done video (audited), audio copied, manifest.jsonl + README.txt")
    s.add_argument("store", help="store path or fsspec URL")
    s.add_argument("--out", required=True, help="export folder (re-running it writes only what is missing or stale)")
    s.add_argument("--lossless", action="store_true", help="lossless H.264 RGB (decodes to the stored frames exactly)")
    s.add_argument("--with-masks", default=None, choices=["video", "png"],
                   help="also the avatar mask r: <name>.mask.mp4 (lossless) or <name>.mask/NNNNNN.png")
    s.add_argument("--crf", type=int, default=18, help="H.264 quality when not --lossless (lower: better)")
    s.add_argument("--videos", nargs="*", default=None, help="only these video ids")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser("verify-export", help="check every file of an export folder against its manifest (exit 1 on a mismatch)")
    s.add_argument("dir", help="an export folder (holds manifest.jsonl)")
    s.set_defaults(func=cmd_verify_export)

    s = sub.add_parser("anonymize", help="run the anonymize flow in-process (no server needed)")
    s.add_argument("--dataset", required=True, help="ntu, ntu120, tsh, ucf101, hmdb51, folder, sample, demo")
    s.add_argument("--source", default=None, help="dataset folder (default $ANONYMASK_DATA/raw/<dataset>)")
    s.add_argument("--store", default=None, help="store path/URL (default $ANONYMASK_DATA/stores/<dataset>.zarr)")
    s.add_argument("--set", nargs="*", default=[], metavar="STAGE.KEY=VALUE",
                   help="config overrides, e.g. refine.backend=animatediff segment.grow=6")
    s.add_argument("--preset", action="append", default=[], metavar="NAME", help=PRESET_HELP)
    s.add_argument("--limit", type=int, default=None, help="only the first N videos")
    s.add_argument("--videos", nargs="*", default=None, help="only these video ids")
    s.add_argument("--runner", default="local", help="local (default), dask, or a Dask scheduler address")
    s.add_argument("--workers", type=int, default=None, help="worker processes of --runner dask (default 2)")
    s.add_argument("--video-memory-gb", type=float, default=None,
                   help="memory budget of one video (the Dask worker's memory limit)")
    s.add_argument("--video-timeout-s", type=float, default=None, help="wall-clock budget of one video")
    s.add_argument("--no-verify-done", action="store_true",
                   help="trust complete records without re-checking their checksums (faster resume)")
    s.add_argument("--log-dir", default=None, help="run log folder (default $ANONYMASK_DATA/logs)")
    s.add_argument("--export-to", default=None, metavar="DIR",
                   help="then export the publishable videos into DIR ('default': $ANONYMASK_DATA/exports/<dataset>)")
    s.set_defaults(func=cmd_anonymize)

    s = sub.add_parser("privacy", help="privacy accounting: epsilon for a run, sigma for a target, audit a run")
    psub = s.add_subparsers(dest="what", required=True, parser_class=OneLineParser)
    for what in ("epsilon", "sigma"):
        w = psub.add_parser(what, prog=f"anonymask privacy {what}")
        w.add_argument("--q", type=float, required=True, help="Poisson sampling rate (batch / N)")
        w.add_argument("--steps", type=int, required=True)
        w.add_argument("--delta", type=float, required=True)
        if what == "epsilon":
            w.add_argument("--sigma", type=float, required=True, help="noise multiplier")
        else:
            w.add_argument("--epsilon", type=float, required=True, help="target epsilon")
        w.add_argument("--accountant", default="rdp", choices=["rdp", "pld", "prv"])
        w.add_argument("--adjacency", default="add_remove", choices=["add_remove", "replace"],
                       help="neighbouring datasets: add/remove one record, or replace one (MaskDP's Definition 2)")
        w.add_argument("--same-batch", action="store_true",
                       help="epsilon of a mechanism whose public term uses the private batch (the MaskDP paper's "
                            "Algorithm 2): sampling is revealed, so no amplification")  # fmt: skip
        w.add_argument("--json", action="store_true")
        w.set_defaults(func=cmd_privacy)
    w = psub.add_parser("compare", prog="anonymask privacy compare",
                        help="the MaskDP paper's bound against sound analyses of the same noise")
    w.add_argument("--q", type=float, required=True, help="Poisson sampling rate (batch / N)")
    w.add_argument("--steps", type=int, required=True)
    w.add_argument("--delta", type=float, required=True)
    w.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0, 8.0])
    w.add_argument("--json", action="store_true")
    w.set_defaults(func=cmd_privacy_compare)

    w = psub.add_parser("audit", prog="anonymask privacy audit",
                        help="re-check a finished run's privacy claim from its folder (exit 1 on any failure)")
    w.add_argument("run_dir", help="a training run folder (privacy.json, config.json, metrics.json, result.md)")
    w.set_defaults(func=cmd_privacy_audit)

    s = sub.add_parser("generate", help="generate the synthetic dataset (demo/synthetic/tiny preset)")
    s.add_argument("--preset", default="demo")
    s.add_argument("--root", default=None, help="output folder (default $ANONYMASK_DATA/raw/<preset>)")
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=cmd_generate)

    s = sub.add_parser("demo", help="build the demo data and anonymize it in-process")
    s.add_argument("--no-anonymize", action="store_true", help="only build the data and the store")
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("train", help="train the action model (non-private, DP-SGD, MaskDP, FP-DP) in-process")
    s.add_argument("--mode", required=True, choices=["nonprivate", "dp", "maskdp", "fpdp"])
    s.add_argument("--dataset", required=True, help="demo, synthetic, ntu, ntu120, tsh, ucf101, hmdb51")
    s.add_argument("--store", default=None, help="store path/URL (default $ANONYMASK_DATA/stores/<dataset>.zarr)")
    s.add_argument("--epsilon", type=float, default=None, help="target epsilon of the DP modes")
    s.add_argument("--variant", default=None, choices=["real", "render", "rend_diff"],
                   help="training video: raw (Real), Render, or Rend.+Diff")
    s.add_argument("--mask-source", default=None, choices=["r", "q", "none", "auto"],
                   help="public pixel mask (auto: MaskDP on real uses q = Real*, else r)")
    s.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="any TrainSettings field (models/training/action/settings.py), e.g. epochs=20 batch_size=64 size=[112,112]")
    s.add_argument("--run-name", default=None, help="run folder name (default from the settings)")
    s.add_argument("--runs-dir", default=None, help="default $ANONYMASK_DATA/runs")
    s.add_argument("--until-epoch", type=int, default=None, help="stop after this epoch (resume later)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("report", help="accuracy-vs-epsilon tables (CSV, markdown) and plot from run folders")
    s.add_argument("runs_dir", help="folder of run folders (e.g. $ANONYMASK_DATA/runs)")
    s.add_argument("--out", default=None, help="output folder (default RUNS_DIR/report)")
    s.add_argument("--metric", default="auto", choices=["auto", "top1", "mean_class_acc", "clip_top1"],
                   help="auto: mean per-class accuracy on tsh, top-1 elsewhere")
    s.add_argument("--include-incomplete", action="store_true", help="also runs stopped before their last epoch")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("train-skeleton-anon", help="adversarial skeleton anonymizer + evaluation")
    s.add_argument("--dataset", default="synthetic")
    s.add_argument("--source", default="store", help="store (pose tracks), toy, or an .npz file")
    s.add_argument("--store", default=None)
    s.add_argument("--out", default=None, help="default $ANONYMASK_DATA/runs/skeleton-anon-<dataset>")
    s.add_argument("--alphas", default="1,3")
    s.add_argument("--betas", default="10,30")
    s.add_argument("--epochs", type=int, default=20)
    s.add_argument("--adv-epochs", type=int, default=40)
    s.add_argument("--anonymizer", default="mlp", choices=["mlp", "unet"])
    s.add_argument("--device", default="cpu")
    s.set_defaults(func=cmd_train_skeleton_anon)

    s = sub.add_parser("bench", help="run the benchmarks, write JSON")
    s.add_argument("--out", default="bench-results")
    s.add_argument("--only", nargs="*", default=None, help="benchmark names to run")
    s.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    s.add_argument("--gpu", action="store_true",
                   help="the GPU check instead (make gpu-check): full-size refinement, MViTv2-S, the paper-protocol "
                        "dry run on one CUDA GPU -> docs/results/gpu/<date>.json; with --quick the tiny CPU version")
    s.add_argument("--gpu-out", default=None, help="with --gpu: the JSON's path")
    s.set_defaults(func=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    from anonymask.cli.prefect_startup import configure_prefect_env, startup_errors
    from anonymask.core.stopping import stop_on_signals

    configure_prefect_env()  # before anything imports prefect: its settings are read at import
    args = build_parser().parse_args(argv)
    try:
        with stop_on_signals(), startup_errors():
            return int(args.func(args) or 0)
    except (AnonymaskError, ValueError) as e:
        print(f"anonymask: error: {e}", file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    except BrokenPipeError:  # `anonymask status STORE | head`: the reader has all it wanted
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
