"""``python -m firmware_bridge.emulator --pty``: run an emulated MCU on a pty and print its path.

Open the printed path from the host like a real board (``FirmwareClient.open(path)``). With
``--schedule faults.json`` the fault proxy sits between that pty and the MCU. SIGUSR1 reboots the
MCU (new session). Ctrl-C or SIGTERM stops and prints the MCU counters as one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import signal
import sys
import threading

from firmware_bridge.emulator.config import McuConfig
from firmware_bridge.emulator.plant import ServoPlant, ServoPlantConfig
from firmware_bridge.fault_proxy import FaultSchedule
from firmware_bridge.rig import PtyRig


def write_path_file(path: str, pty_path: str) -> None:
    """Write the pty path whole or not at all: a reader polling for the file never sees it empty.

    The text goes to a temporary file beside it, which is then renamed over the target (a plain
    ``open(path, "w")`` creates the file before its line is written, and a reader that waits for the
    file to exist can read it empty in between).
    """
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as fh:
            fh.write(pty_path + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m firmware_bridge.emulator")
    parser.add_argument(
        "--pty", action="store_true", required=True, help="serve on a new pty"
    )
    parser.add_argument("--joints", type=int, default=6)
    parser.add_argument("--watchdog-ms", type=int, default=50)
    parser.add_argument(
        "--state-hz", type=float, default=200.0, help="periodic STATE rate"
    )
    parser.add_argument("--seed", type=int, default=0, help="session-id generator seed")
    parser.add_argument(
        "--schedule", help="fault schedule JSON (see fault_proxy.FaultSchedule)"
    )
    parser.add_argument("--path-file", help="also write the pty path to this file")
    parser.add_argument(
        "--hard-q-limit",
        type=float,
        default=None,
        metavar="RAD",
        help="the firmware's hard joint limit, +-RAD on every joint (default 3.0; the "
        "Panda's limits need 4)",
    )
    parser.add_argument(
        "--q0",
        default=None,
        metavar="RAD,...",
        help="the joints' start position, one value per joint, comma-separated (default all 0; "
        "the Panda's home: 0,-0.3,0,-2.3,0,2,0.785,0.08, its gripper channel last, in metres)",
    )
    args = parser.parse_args(argv)
    if not args.state_hz > 0:
        parser.exit(2, f"error: --state-hz {args.state_hz:g}: must be > 0\n")
    q0 = None
    if args.q0 is not None:
        try:
            q0 = tuple(float(x) for x in args.q0.split(","))
        except ValueError:
            parser.exit(2, f"error: --q0 {args.q0}: give {args.joints} numbers separated by commas\n")
        if len(q0) != args.joints or not all(math.isfinite(x) for x in q0):
            parser.exit(2, f"error: --q0 {args.q0}: give {args.joints} finite numbers (one per --joints), "
                        "separated by commas\n")
    limits = (
        {}
        if args.hard_q_limit is None
        else {"hard_q_min_rad": -args.hard_q_limit, "hard_q_max_rad": args.hard_q_limit}
    )
    try:
        config = McuConfig(
            n_joints=args.joints,
            watchdog_ms=args.watchdog_ms,
            state_period_s=1.0 / args.state_hz,
            seed=args.seed,
            **limits,
        )
    except (ValueError, TypeError) as err:
        parser.exit(2, f"error: {err} (from --joints / --watchdog-ms / --state-hz / --hard-q-limit)\n")
    try:
        schedule = FaultSchedule.from_json(args.schedule) if args.schedule else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
        parser.exit(2, f"error: --schedule {args.schedule}: {err} (want a JSON object: seed, rules)\n")
    plant = None
    if q0 is not None:
        limit = config.hard_q_max_rad
        if any(not config.hard_q_min_rad <= x <= limit for x in q0):
            parser.exit(2, f"error: --q0 {args.q0}: outside the hard joint limits "
                        f"[{config.hard_q_min_rad:g}, {limit:g}] (--hard-q-limit)\n")
        plant = ServoPlant(ServoPlantConfig(n_joints=args.joints), q0_rad=q0)
    rig = PtyRig(config, plant=plant, schedule=schedule)
    stop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: rig.reboot())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    rig.start()
    print(rig.path, flush=True)
    if args.path_file:
        write_path_file(args.path_file, rig.path)
    try:
        while rig.error is None and not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        rig.close()
        with rig.lock:
            counters = dataclasses.asdict(rig.mcu.counters)
        counters["link"].pop("rtt_s", None)
        print(json.dumps(counters), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
