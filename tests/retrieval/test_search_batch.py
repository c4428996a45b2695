"""The search batcher: concurrent searches share one store query per kind, each keeps its own hits,
and a failing query fails only the searches that shared it."""

import asyncio

import numpy as np

from pipelines.retrieval.search_batch import SearchBatcher
from pipelines.retrieval.store import StoredChunk


class FakeStore:
    """Hits named after the kind and each vector's first value; records every query."""

    def __init__(self, fail_where=None):
        self.calls = []
        self.fail_where = fail_where

    def query(self, kind, vectors, k, where=None):
        self.calls.append((kind, len(vectors), k, where))
        if where is not None and where == self.fail_where:
            raise RuntimeError("store down")
        return [[StoredChunk(f"{kind}-{v[0]:g}-{j}", "t", {"w": str(where)}) for j in range(k)] for v in vectors]


def vectors(*firsts):
    return np.array([[f, 0.0] for f in firsts], dtype=np.float32)


def test_concurrent_searches_share_one_query_per_kind_and_keep_their_own_hits():
    store = FakeStore()
    batcher = SearchBatcher(store)
    jobs = [
        (["a", "b"], vectors(1, 2), 2, None),
        (["a", "b"], vectors(3), 2, None),
        (["a", "b"], vectors(4, 5, 6), 2, {"cat": "x"}),
        (["a", "b"], vectors(7), 2, None),
    ]

    async def together():
        return await asyncio.gather(*(batcher.search(*job) for job in jobs))

    results = asyncio.run(together())
    assert sorted(store.calls, key=str) == sorted(
        [("a", 4, 2, None), ("b", 4, 2, None), ("a", 3, 2, {"cat": "x"}), ("b", 3, 2, {"cat": "x"})], key=str
    )
    assert batcher.queries == 4
    alone = []
    for job in jobs:
        solo = SearchBatcher(FakeStore())
        alone.append(asyncio.run(solo.search(*job)))
    assert results == alone
    assert [c.id for c in results[1][1][0]] == ["b-3-0", "b-3-1"]
    third = [[c.id for c in hits] for hits in results[2][0]]
    assert third == [["a-4-0", "a-4-1"], ["a-5-0", "a-5-1"], ["a-6-0", "a-6-1"]]


def test_a_failing_query_fails_only_the_searches_that_shared_it():
    batcher = SearchBatcher(FakeStore(fail_where={"cat": "bad"}))

    async def together():
        return await asyncio.gather(
            batcher.search(["a"], vectors(1), 1, {"cat": "bad"}),
            batcher.search(["a"], vectors(2), 1, None),
            return_exceptions=True,
        )

    bad, good = asyncio.run(together())
    assert isinstance(bad, RuntimeError) and str(bad) == "store down"
    assert [c.id for c in good[0][0]] == ["a-2-0"]


def test_a_search_arriving_during_a_batch_joins_the_next_one_and_loops_can_change():
    store = FakeStore()
    batcher = SearchBatcher(store)

    async def staggered():
        first = asyncio.ensure_future(batcher.search(["a"], vectors(1), 1))
        await asyncio.sleep(0)  # the first batch has started with one search
        rest = [batcher.search(["a"], vectors(i), 1) for i in (2, 3)]
        return [await first, *await asyncio.gather(*rest)]

    results = asyncio.run(staggered())
    assert [r[0][0][0].id for r in results] == ["a-1-0", "a-2-0", "a-3-0"]
    assert [n for _, n, _, _ in store.calls] == [1, 2]
    # a second event loop (a later asyncio.run) gets answers too
    assert asyncio.run(batcher.search(["a"], vectors(9), 1))[0][0][0].id == "a-9-0"


def test_empty_kinds_give_empty_results():
    batcher = SearchBatcher(FakeStore())
    assert asyncio.run(batcher.search([], vectors(1), 3)) == []
    assert batcher.queries == 0


def test_event_loops_in_two_threads_each_get_their_answers():
    import threading
    import time

    class SlowStore(FakeStore):
        def query(self, kind, vectors, k, where=None):
            time.sleep(0.01)
            return super().query(kind, vectors, k, where)

    batcher = SearchBatcher(SlowStore())
    answers = {}

    def worker(name, first):
        async def main():
            return await asyncio.gather(*(batcher.search(["a"], vectors(first + i), 1) for i in range(3)))

        answers[name] = [r[0][0][0].id for r in asyncio.run(main())]

    threads = [threading.Thread(target=worker, args=(n, f), daemon=True) for n, f in (("x", 10), ("y", 20))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert answers == {"x": ["a-10-0", "a-11-0", "a-12-0"], "y": ["a-20-0", "a-21-0", "a-22-0"]}
