"""Queries reuse each kind's collection handle and count until a write through the store."""

from __future__ import annotations

from pipelines.retrieval.store import KnowledgeStore
from tests.retrieval.conftest import HashEmbedder


class CountingClient:
    """Wraps a Chroma client, counting the look-ups a query used to make every time."""

    def __init__(self, client):
        self.client, self.calls = client, {"list_collections": 0, "get_collection": 0}

    def __getattr__(self, name):
        attr = getattr(self.client, name)
        if name in self.calls:

            def counted(*args, **kwargs):
                self.calls[name] += 1
                return attr(*args, **kwargs)

            return counted
        return attr


def test_queries_look_the_collection_up_once_until_a_write(tmp_path):
    store, embed = KnowledgeStore(tmp_path / "kb"), HashEmbedder()
    texts = ["fractions are parts of a whole", "a triangle has three sides"]
    vectors = embed.encode_documents(texts).dense
    store.upsert("teaching_theory", embed.identity, ["a", "b"], texts, vectors, [{"n": 1}] * 2)
    store.client = client = CountingClient(store.client)
    query = embed.encode_queries(["what is a fraction"]).dense
    first = store.query("teaching_theory", query, 5)
    for _ in range(3):
        assert [[c.id for c in hits] for hits in store.query("teaching_theory", query, 5)] == [[c.id for c in first[0]]]
    assert [c.id for c in first[0]] == ["a", "b"]
    assert client.calls == {"list_collections": 1, "get_collection": 1}
    assert store.query("safety", query, 5) == [[]]  # a missing kind is remembered as empty too
    assert store.query("safety", query, 5) == [[]]
    assert client.calls == {"list_collections": 2, "get_collection": 1}

    extra = ["a fraction names equal parts"]
    store.upsert("teaching_theory", embed.identity, ["c"], extra, embed.encode_documents(extra).dense, [{"n": 2}])
    assert len(store.query("teaching_theory", query, 5)[0]) == 3  # the write is seen: the count was forgotten
    store.delete("teaching_theory", ["a", "c"])
    assert [c.id for c in store.query("teaching_theory", query, 5)[0]] == ["b"]
    store.drop("teaching_theory")
    assert store.query("teaching_theory", query, 5) == [[]]
