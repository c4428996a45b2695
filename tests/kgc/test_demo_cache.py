"""Demonstration-pool and query vectors cached on disk: a second run (or shard) embeds nothing again."""

from __future__ import annotations

import os
import stat

import numpy as np

from pipelines.kgc.demo_cache import DemoVectorCache, default_folder, pool_key
from pipelines.kgc.demos import DemoSelector
from pipelines.kgc.schema import Sentence
from tests.kgc.scripted import char_embed

POOL = [
    Sentence("p:0", "ace05", "ee", "en", "Rebels attacked the capital ."),
    Sentence("p:1", "ace05", "ee", "en", "Born in Paris in 1950 Anna Smith is a famous painter ."),
    Sentence("p:2", "ace05", "ee", "en", "The company hired a new chief ."),
]


class Counting:
    def __init__(self):
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        return char_embed(texts)


def select(cache: DemoVectorCache, embed: Counting, pool=POOL) -> list[str]:
    selector = DemoSelector({"ace05": pool}, embed, cache=cache)
    selector.prepare(["Anna was born in Paris ."])
    return [s.id for s in selector.nearest("ace05", "Anna was born in Paris .", 2)]


def test_a_second_run_reads_the_pool_and_query_vectors_instead_of_embedding(tmp_path):
    first, second = Counting(), Counting()
    ids = select(DemoVectorCache(tmp_path, identity="emb:a"), first)
    again = select(DemoVectorCache(tmp_path, identity="emb:a"), second)
    assert ids == again == ["p:1", "p:2"]
    assert len(first.texts) == 1 + 3  # the query and the pool
    assert second.texts == []  # both read back
    stored = tmp_path / f"{pool_key('emb:a', [s.text for s in POOL])}.npy"
    query = tmp_path / f"{pool_key('emb:a', ['Anna was born in Paris .'])}.npy"
    assert sorted(tmp_path.glob("*.npy")) == sorted([stored, query])
    np.testing.assert_array_equal(np.load(stored), char_embed([s.text for s in POOL]))
    np.testing.assert_array_equal(np.load(query), char_embed(["Anna was born in Paris ."]))
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(stored.stat().st_mode) == 0o666 & ~umask
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_late_query_is_embedded_alone_and_not_stored(tmp_path):
    embed = Counting()
    selector = DemoSelector({"ace05": POOL}, embed, cache=DemoVectorCache(tmp_path, identity="emb:a"))
    selector.prepare(["Anna was born in Paris ."])
    late = "Rebels attacked the city ."
    assert [s.id for s in selector.nearest("ace05", late, 1)] == ["p:0"]
    assert embed.texts[-1:] == [late] and len(list(tmp_path.glob("*.npy"))) == 2


def test_a_changed_pool_or_embedder_embeds_again(tmp_path):
    select(DemoVectorCache(tmp_path, identity="emb:a"), Counting())
    other_embedder, other_pool = Counting(), Counting()
    select(DemoVectorCache(tmp_path, identity="emb:b"), other_embedder)
    changed = [*POOL[:2], Sentence("p:2", "ace05", "ee", "en", "The company fired its chief .")]
    select(DemoVectorCache(tmp_path, identity="emb:a"), other_pool, pool=changed)
    assert len(other_embedder.texts) == 4  # a new embedder: the query and the pool again
    assert len(other_pool.texts) == 3  # the same query, read back; the changed pool embedded
    assert len(list(tmp_path.glob("*.npy"))) == 5  # a pool and a query per embedder, and the changed pool


def test_an_unreadable_or_misshapen_file_is_embedded_again(tmp_path):
    cache = DemoVectorCache(tmp_path, identity="emb:a")
    texts = [s.text for s in POOL]
    cache.path(texts).parent.mkdir(parents=True, exist_ok=True)
    cache.path(texts).write_bytes(b"not numpy")
    embed = Counting()
    np.testing.assert_array_equal(cache.vectors(texts, embed), char_embed(texts))
    assert embed.texts == texts
    np.save(cache.path(texts), np.zeros((2, 26), dtype=np.float32))  # wrong row count
    assert cache.vectors(texts, Counting()).shape == (3, 26)
    assert np.load(cache.path(texts)).shape == (3, 26)


def test_the_default_folder_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_folder() == tmp_path / "edumas" / "kgc-demos"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert str(default_folder()).endswith(".cache/edumas/kgc-demos")


def test_equal_distances_keep_pool_order_and_the_sentence_itself_is_skipped(tmp_path):
    same = "The company hired a new chief ."
    pool = [Sentence(f"p:{i}", "ace05", "ee", "en", text) for i, text in
            enumerate([POOL[0].text, same, "The company hired a new chief !", same, same])]
    selector = DemoSelector({"ace05": pool}, Counting())
    selector.prepare([same])
    # p:1, p:3 and p:4 are the query itself; the two left come by distance, then pool order
    assert [s.id for s in selector.nearest("ace05", same, 2)] == ["p:2", "p:0"]
    twins = [Sentence(f"t:{i}", "ace05", "ee", "en", "Anna Smith .") for i in range(3)]
    selector = DemoSelector({"ace05": twins}, Counting())
    assert [s.id for s in selector.nearest("ace05", "Anna Smith ,", 3)] == ["t:0", "t:1", "t:2"]
