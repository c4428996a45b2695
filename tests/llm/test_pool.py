"""The server pool's cooldown: only a success that started after a failure ends it."""

from __future__ import annotations

from pipelines.llm.pool import ServerPool


def test_success_started_before_the_failure_keeps_the_cooldown():
    clock = [0.0]
    pool = ServerPool(["http://a/v1", "http://b/v1"], cooldown_s=5.0, clock=lambda: clock[0])
    a = pool.servers[0]
    slow = pool.acquire(exclude={"http://b/v1"})  # a long request to a goes out at t=0
    assert slow is a
    clock[0] = 1.0
    failing = pool.acquire(exclude={"http://b/v1"})
    pool.release(failing, ok=False, started=1.0)  # a fails at t=1: cooldown until t=6
    clock[0] = 2.0
    pool.release(slow, ok=True, started=0.0)  # the old request succeeds at t=2
    assert a.down_until == 6.0
    assert [pool.acquire().url for _ in range(3)] == ["http://b/v1"] * 3  # a still avoided
    clock[0] = 3.0
    fresh = pool.acquire(exclude={"http://b/v1"})  # a request that starts after the failure
    pool.release(fresh, ok=True, started=3.0)
    assert a.down_until == 0.0
    assert pool.stats()["http://a/v1"] == {"requests": 3, "failures": 1}


def test_cooldown_expires_by_itself():
    clock = [0.0]
    pool = ServerPool(["http://a/v1", "http://b/v1"], cooldown_s=5.0, clock=lambda: clock[0])
    server = pool.acquire(exclude={"http://b/v1"})
    pool.release(server, ok=False, started=0.0)
    b = pool.acquire()
    assert b.url == "http://b/v1"  # b busy with one request, a cooling down: b again
    assert pool.acquire().url == "http://b/v1"
    clock[0] = 5.5
    assert pool.acquire().url == "http://a/v1"  # cooled down, and fewest outstanding
