"""`edge report RUN_DIR`: timelines, latency histogram, summary and an annotated video of one run;
with --rerun also a rerun recording (run.rrd)."""

from __future__ import annotations

from pathlib import Path

from edge.cli import add_subparser


def register(sub) -> None:
    p = add_subparser(sub, "report", "Report one run directory: report.html (self-contained), report.md, PNGs, video; "
                      "--rerun: a rerun recording.", """
  edge report runs/20260101-120000                 # -> runs/20260101-120000/report/report.html
  edge report runs/x --out /tmp/rep --max-episodes 3
  edge report runs/x --no-video
  edge report runs/x --rerun && rerun runs/x/report/run.rrd""")
    p.add_argument("run_dir", help="a run directory (meta.json, ticks.jsonl, queries.jsonl, ...)")
    p.add_argument("--out", default=None, help="output directory (default: RUN_DIR/report)")
    p.add_argument("--max-episodes", type=int, default=10, help="timelines for the first N episodes")
    p.add_argument("--no-video", action="store_true", help="skip the annotated video of saved frames")
    p.add_argument("--video-max-mb", type=float, default=2.0,
                   help="drop frames until the video is at most this large")
    p.add_argument("--rerun", action="store_true",
                   help="also write run.rrd, a rerun recording of the first --max-episodes episodes (robot "
                        "model, TCP path, camera frames, K/C/latency/queue plots per tick); open it with "
                        "`rerun run.rrd`; needs rerun-sdk (pip install rerun-sdk; the viz extra)")
    p.set_defaults(func=run)


def run(args) -> int:
    from edge.errors import EdgeError
    from edge.profiler.report import build_report

    if args.max_episodes < 1:
        raise EdgeError(f"--max-episodes={args.max_episodes} must be >= 1")
    if not Path(args.run_dir).is_dir():
        raise EdgeError(f"run directory {args.run_dir} " + ("is a file: give the run's directory"
                                                           if Path(args.run_dir).exists() else "not found"))
    if not (Path(args.run_dir) / "ticks.jsonl").is_file():  # what every run writes; a dataset has episodes/
        what = ("a demonstration dataset (edge data record)" if (Path(args.run_dir) / "episodes").is_dir()
                else "not a run directory (no ticks.jsonl)")
        raise EdgeError(f"{args.run_dir}: {what}; give a directory written by `edge run` (or `edge profile`'s runs/<arm>)")
    if not (args.video_max_mb > 0 and args.video_max_mb < float("inf")):
        raise EdgeError(f"--video-max-mb {args.video_max_mb:g}: must be a size in MB > 0 (use --no-video for none)")
    if args.out is not None:
        from edge.commands._out import check_writable_dir
        from edge.profiler.report import previous_report_files

        check_writable_dir(args.out)
        previous_report_files(Path(args.out), Path(args.run_dir))  # refuses another run's or report's files
    if args.rerun:
        from edge.profiler.rerun_log import import_rerun

        import_rerun()  # before any work: a missing package is a one-line error
    res = build_report(args.run_dir, args.out, max_episodes=args.max_episodes, video=not args.no_video,
                       video_max_bytes=int(args.video_max_mb * 1e6))
    print(f"wrote {res['html']} and {res['md']} ({_count(len(res['pngs']), 'figure')}, "
          f"{_count(len(res['videos']), 'video')})")
    if args.rerun:
        from edge.profiler.rerun_log import write_rerun

        from edge.profiler.report import add_report_files

        rrd = write_rerun(args.run_dir, res["out_dir"] / "run.rrd", max_episodes=args.max_episodes)
        add_report_files(res["out_dir"], Path(args.run_dir), [rrd.name])
        print(f"wrote {rrd} (open it with: rerun {rrd})")
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
