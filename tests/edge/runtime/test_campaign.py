import os

import pytest

from edge.runtime.campaign import CampaignError, run_campaign
from tests.fakes import campaign_square as square


def die_once(job):
    """Kills its worker process the first time job 1 runs (a marker file remembers)."""
    marker = job["dir"] + "/died"
    if job["seed"] == 1 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(9)
    return job["seed"]


def always_die(job):
    os._exit(9)


JOBS = [{"seed": s} for s in range(6)]


def test_same_results_in_order_with_1_and_2_workers():
    one = run_campaign(square, JOBS, workers=1, progress=False)
    two = run_campaign(square, JOBS, workers=2, progress=False)
    assert [r["value"] for r in one] == [r["value"] for r in two] == [s * s for s in range(6)]
    assert len({r["pid"] for r in two}) >= 1 and one[0]["pid"] == os.getpid()


def test_a_dying_worker_is_retried_and_nothing_is_lost(tmp_path):
    seen = []
    jobs = [{"seed": s, "dir": str(tmp_path)} for s in range(4)]
    out = run_campaign(die_once, jobs, workers=2, progress=False, on_result=lambda i, r: seen.append(i))
    assert out == [0, 1, 2, 3] and sorted(seen) == [0, 1, 2, 3]


def test_a_job_that_always_kills_its_worker_fails_loudly():
    with pytest.raises(CampaignError, match="still failed after 1 retries"):
        run_campaign(always_die, [{"seed": 0}], workers=2, retries=1, progress=False)


@pytest.mark.slow
def test_ray_gives_the_same_results_as_local_processes():
    ray = pytest.importorskip("ray", reason="Ray is the optional 'dist' extra")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        got = run_campaign(square, JOBS, ray_address="local", progress=False)
    finally:
        ray.shutdown()
    assert [r["value"] for r in got] == [r["value"] for r in run_campaign(square, JOBS, workers=2, progress=False)]


@pytest.mark.parametrize("kw", [{"workers": 0}, {"workers": -3}, {"workers": 1.5}, {"retries": -1}])
def test_a_bad_worker_or_retry_count_is_refused_before_any_job_runs(kw):
    from edge.errors import EdgeError

    ran = []
    with pytest.raises(EdgeError, match=next(iter(kw))):
        run_campaign(ran.append, JOBS, progress=False, **kw)
    assert ran == []
