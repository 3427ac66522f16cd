"""Host client <-> emulated MCU over a pty at a fixed command rate (default 1 kHz).

The emulator runs in its own process (``python -m firmware_bridge.emulator --pty``), as a board
would, so the client and the MCU do not share a GIL. The client sends a JOINT_COMMAND on every
period of an absolute-deadline loop (overruns are skipped, not caught up), a HEARTBEAT every
50 ms, and polls in between. Round trip = command written -> STATE naming that command decoded
(the MCU answers each applied command with a STATE). A pty has no baud rate, so this measures
the software path (codec, client, OS, emulator tick), not a UART.

    python benchmarks/link_throughput.py                 # 10 s at 1 kHz
    python benchmarks/link_throughput.py --seconds 3 --rate-hz 500 --out /tmp/link.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.argtypes import number, whole, writable_path  # noqa: E402
from firmware_bridge.wire_constants import MAX_JOINTS  # noqa: E402

from firmware_bridge.client import ClientConfig, FirmwareClient  # noqa: E402
from firmware_bridge.link_stats import percentile  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "link_throughput.json"


def machine_info() -> dict[str, object]:
    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                check=False,
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=5,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "git_commit": commit,
    }


def _start_emulator(joints: int, path_file: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "firmware_bridge.emulator",
            "--pty",
            "--joints",
            str(joints),
            "--path-file",
            str(path_file),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if path_file.exists() and path_file.read_text().strip():
            return proc
        if proc.poll() is not None:
            raise RuntimeError(f"emulator exited early: {proc.stderr.read()}")
        time.sleep(0.02)
    proc.kill()
    raise RuntimeError("emulator did not publish its pty path within 10 s")


def run(seconds: float, rate_hz: float, joints: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        emu = _start_emulator(joints, Path(tmp) / "pty")
        pty_path = (Path(tmp) / "pty").read_text().strip()
        try:
            return _drive(pty_path, seconds, rate_hz, joints) | {"mcu": _stop(emu)}
        finally:
            if emu.poll() is None:
                emu.kill()


def _stop(emu: subprocess.Popen) -> dict[str, object] | None:
    emu.send_signal(signal.SIGTERM)
    try:
        _, err = emu.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        emu.kill()
        return None
    for line in reversed(err.splitlines()):
        if line.startswith("{"):
            counters = json.loads(line)
            link = counters.pop("link")
            return counters | {
                f"link_{k}": v for k, v in link.items() if k != "rtt_window"
            }
    return None


def _drive(path: str, seconds: float, rate_hz: float, joints: int) -> dict[str, object]:
    cfg = ClientConfig(
        rtt_window=10_000_000, max_pending=4096, command_valid_for_s=0.05
    )
    client = FirmwareClient.open(path, cfg)
    client.handshake()
    client.arm()
    period_s = 1.0 / rate_hz
    sent = overruns = 0
    late_s: list[float] = []
    t_start = time.monotonic()
    next_t = t_start
    end = t_start + seconds
    stats0 = (
        client.stats.frames_rx,
        client.stats.bytes_rx,
        client.stats.frames_tx,
        client.stats.bytes_tx,
    )
    while next_t < end:
        now = time.monotonic()
        late_s.append(now - next_t)
        phase = 2 * math.pi * 0.5 * (now - t_start)
        # A slow sine, well inside the limits.
        client.send_command([0.3 * math.sin(phase)] * joints)
        sent += 1
        client.maybe_send_heartbeat()
        next_t += period_s
        now = time.monotonic()
        if now > next_t:  # overrun: skip the missed periods, never burst
            skipped = int((now - next_t) / period_s) + 1
            overruns += skipped
            next_t += skipped * period_s
        while True:
            remaining = next_t - time.monotonic()
            if remaining <= 0:
                break
            client.poll(min(remaining, cfg.read_timeout_s))
    client.poll(0.05)
    wall_s = time.monotonic() - t_start
    mode_at_end = client.mode.name if client.mode is not None else None
    client.disarm()
    s = client.stats
    rtts = sorted(s.rtt_s)
    late = sorted(late_s)
    result = {
        "rate_hz": rate_hz,
        "seconds": seconds,
        "joints": joints,
        "wall_s": round(wall_s, 3),
        "commands_sent": sent,
        "loop_overruns_skipped": overruns,
        "wakeup_late_p50_s": percentile(late, 50),
        "wakeup_late_p99_s": percentile(late, 99),
        "frames_tx_per_s": round((s.frames_tx - stats0[2]) / wall_s, 1),
        "frames_rx_per_s": round((s.frames_rx - stats0[0]) / wall_s, 1),
        "bytes_tx_per_s": round((s.bytes_tx - stats0[3]) / wall_s, 1),
        "bytes_rx_per_s": round((s.bytes_rx - stats0[1]) / wall_s, 1),
        "rtt_samples": len(rtts),
        "rtt_p50_s": percentile(rtts, 50),
        "rtt_p90_s": percentile(rtts, 90),
        "rtt_p99_s": percentile(rtts, 99),
        "rtt_max_s": rtts[-1] if rtts else None,
        "mode_at_end": mode_at_end,  # before the final DISARM
        "client_stats": {
            k: v for k, v in s.as_dict().items() if not k.startswith("rtt")
        },
    }
    client.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=number(0, lo_open=True), default=10.0)
    parser.add_argument("--rate-hz", type=number(0, lo_open=True), default=1000.0)
    parser.add_argument("--joints", type=whole(1, MAX_JOINTS), default=6)
    parser.add_argument("--out", type=writable_path, default=str(RESULTS))
    args = parser.parse_args(argv)
    result = {
        "benchmark": "link_throughput",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "transport": "pty (os.openpty), emulator in a separate process, 1 kHz firmware tick",
        "loadavg_before": os.getloadavg(),
        **run(args.seconds, args.rate_hz, args.joints),
        "loadavg_after": os.getloadavg(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    keys = (
        "commands_sent",
        "frames_tx_per_s",
        "frames_rx_per_s",
        "rtt_p50_s",
        "rtt_p99_s",
        "loop_overruns_skipped",
    )
    print(json.dumps({k: result[k] for k in keys}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
