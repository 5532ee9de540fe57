"""The waits' back-off (_cuda/_source.py's ``_BACKOFF_START`` and ``_BACKOFF``,
the source every spin-wait on the GPU compiles), run as Python against a fake
clock (each poll takes ``poll_ns``, a nap twice what it asks, as on an H200),
for an answer that arrives at any time and a PE that may leave: the wait ends
at the first poll that sees the answer; it never sleeps within its first
POLLS polls or within SPIN_NS of its POLLS-th, and starts to within 16 polls
after that; its naps ask 32 ns doubling up to MAX_SLEEP; it looks whether its
PE has left at every GONE_POLLS-th poll past POLLS, and only there, and
stops at the first look after the PE left. Property-tested. Prints ``ok``."""

from hypothesis import given, settings
from hypothesis import strategies as st

from numba_shmem._cuda import _source

POLLS, SPIN_NS = _source._POLLS_BEFORE_SLEEP, _source._SPIN_NS
GONE_POLLS, MAX_SLEEP = _source._GONE_POLLS, _source._MAX_SLEEP_NS
SOURCE = compile("def impl():\n" + _source._indent(
    _source._BACKOFF_START + "while waiting():\n" + _source._indent(_source._BACKOFF, 1), 1),
    "_BACKOFF", "exec")
NEVER = 1 << 62


class Left(Exception):
    """The wait's ``_trap()``: its PE left the job."""


def wait(poll_ns, arrives_ns, leaves_ns):
    """Run one wait: (polls, [(poll, clock, ns asked)] of its naps, [(poll,
    clock)] of its looks at the leaving flag, whether it stopped for its PE's
    leaving, the clock at each poll)."""
    clock, polls, naps, looks, at = [0], [0], [], [], []

    def waiting():
        clock[0] += poll_ns
        polls[0] += 1
        at.append(clock[0])
        return clock[0] < arrives_ns

    def nanosleep(ns):
        naps.append((polls[0], clock[0], ns))
        clock[0] += 2 * ns

    def left():
        looks.append((polls[0], clock[0]))
        return clock[0] >= leaves_ns

    def trap():
        raise Left

    scope = {**_source._spin_namespace(False, 0), "waiting": waiting, "_now": lambda: clock[0],
             "_nanosleep": nanosleep, "_left": left, "_trap": trap}
    exec(SOURCE, scope)
    try:
        scope["impl"]()
    except Left:
        return polls[0], naps, looks, True, at
    return polls[0], naps, looks, False, at


@settings(max_examples=2000, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 400_000), st.booleans(), st.integers(0, 400_000))
def check(poll_ns, arrives_ns, leaves, leaves_ns):
    polls, naps, looks, stopped, at = wait(poll_ns, arrives_ns, leaves_ns if leaves else NEVER)
    # it polls until the answer is there, or until the look that finds its PE gone
    if stopped:
        assert looks and looks[-1][0] == polls and looks[-1][1] >= leaves_ns
        assert all(t < leaves_ns for _, t in looks[:-1])
    else:
        assert at[-1] >= arrives_ns and all(t < arrives_ns for t in at[:-1])
    # it looks whether its PE has left at every GONE_POLLS-th poll past POLLS that did
    # not see the answer, only there
    went_on = polls if stopped else polls - 1
    assert [p for p, _ in looks] == [p for p in range(POLLS + 1, went_on + 1)
                                     if p % GONE_POLLS == 0]
    # no nap within its first POLLS polls or SPIN_NS of its POLLS-th; then within 16 polls
    started = at[POLLS] if polls > POLLS else None  # (the clock at poll POLLS + 1)
    if naps:
        first_poll, first_clock, _ = naps[0]
        assert first_poll > POLLS and first_clock - started > SPIN_NS
        late = [p for p in range(POLLS + 1, first_poll) if at[p - 1] - started > SPIN_NS]
        assert len(late) <= 16, (first_poll, late[:3])
    else:
        assert polls <= POLLS + 16 or at[polls - 1] - started <= SPIN_NS + 17 * poll_ns
    # and once it naps, every poll naps: 32 ns doubling up to MAX_SLEEP
    if naps:
        assert [p for p, _, _ in naps] == list(range(naps[0][0], naps[0][0] + len(naps)))
    asked = [ns for _, _, ns in naps]
    assert asked == [min(32 << k, MAX_SLEEP) for k in range(len(asked))]


check()
print("ok")
