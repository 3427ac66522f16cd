"""Pair arms of several ``wm_sim_search.py`` result files episode by episode (pooled over seeds).

Arms measured in different runs of ``wm_sim_search.py`` (different agents, different first seeds)
are paired here from the files' per-episode outcomes, checked seed by seed. Each side is a list
of ``FILE:ARM`` items (``ARM`` the arm's full name, e.g. ``push3:init_s0:agent``); a side's
episodes are its items' episodes in order, so ``--a`` and ``--b`` must list the same seeds in the
same order (e.g. seed 0's first and next 100 episodes, then seed 1's). Prints and writes the
successes, Wilson intervals, discordant counts and the exact McNemar p (:func:`edge.stats.paired`).

    python benchmarks/wm_pairs.py \\
        --a R/wm_sim_search_play_agents.json:push3:play_s0:agent \\
        --b R/wm_sim_search_offline_init.json:push3:default_s0:agent R/wm_sim_search_offline_init_more.json:push3:default_s0:agent \\
        --out /tmp/pairs.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge.argtypes import writable_file_or_none
from edge.errors import EdgeError
from edge.stats import paired
from edge.telemetry import machine_info
from edge.vla.manifest import git_revision


def side_outcomes(items: list[str], flag: str) -> tuple[list[int], list[bool]]:
    """(seeds, successes) of a side's ``FILE:ARM`` items, in order."""
    seeds, wins, cache = [], [], {}
    for item in items:
        path, sep, arm = item.partition(".json:")
        if not sep or not arm:
            raise EdgeError(f"{flag} {item!r}: expected FILE.json:ARM (ARM as the file names it, e.g. push3:x_s0:agent)")
        path += ".json"
        if path not in cache:
            if not Path(path).is_file():
                raise EdgeError(f"{flag} {item!r}: no such file {path}")
            try:
                cache[path] = {a["name"]: a for a in json.loads(Path(path).read_text())["arms"]}
            except (ValueError, KeyError, TypeError) as e:
                raise EdgeError(f"{flag} {item!r}: {path} is not a wm_sim_search.py output (no readable 'arms' "
                                f"list: {type(e).__name__} {e})") from None
        arms = cache[path]
        if arm not in arms:
            raise EdgeError(f"{flag} {item!r}: {path} has no arm {arm!r}; it has {sorted(arms)}")
        a = arms[arm]
        if not isinstance(a, dict) or any(k not in a for k in ("per_episode_seed", "per_episode_success")):
            raise EdgeError(f"{flag} {item!r}: arm {arm!r} in {path} has no per-episode seeds and successes")
        seeds += [int(s) for s in a["per_episode_seed"]]
        wins += [bool(w) for w in a["per_episode_success"]]
    return seeds, wins


def pair_sides(a: list[str], b: list[str]) -> dict:
    sa, wa = side_outcomes(a, "--a")
    sb, wb = side_outcomes(b, "--b")
    if sa != sb:
        first = next((i for i, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
        raise EdgeError(f"--a and --b did not play the same seeds in the same order ({len(sa)} vs {len(sb)} "
                        f"episodes; first difference at episode {first})")
    return {"a": a, "b": b, **paired(wa, wb)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", nargs="+", required=True, metavar="FILE:ARM", help="side A's arms, in seed order")
    ap.add_argument("--b", nargs="+", required=True, metavar="FILE:ARM", help="side B's arms, the same seeds")
    ap.add_argument("--out", type=writable_file_or_none, default="", help="also write the result as JSON here")
    args = ap.parse_args(argv)
    try:
        res = pair_sides(args.a, args.b)
    except EdgeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"A {res['successes_a']} vs B {res['successes_b']} of {res['episodes']} "
          f"({res['only_a']} / {res['only_b']} discordant, McNemar p = {res['mcnemar_p']:.2g})")
    if args.out:
        out = {"command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
               "machine": machine_info(), "git_revision": git_revision(), **res}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
