"""The tests' hard timeout (``conftest.run_hard``) leaves no process behind."""

import re
import sys
import time

import pytest

from conftest import PROGRAMS, _started, run_hard


def test_a_hung_job_leaves_no_process_behind_not_even_one_outside_its_group():
    with pytest.raises(pytest.fail.Exception, match="hung past 5 s") as failed:
        run_hard([sys.executable, str(PROGRAMS / "stubborn_job.py")], 5, grace=1)
    printed = re.search(r"stdout:\n(\d+) (\d+)", str(failed.value))
    pids = [int(pid) for pid in printed.groups()]
    deadline = time.monotonic() + 10
    while any(_started(pid) is not None for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)  # (killed: gone once init has reaped them)
    assert all(_started(pid) is None for pid in pids), f"processes {pids} outlived the job"
