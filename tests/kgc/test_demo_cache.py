"""Demonstration-pool vectors cached on disk: a second run (or shard) embeds no pool again."""

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


def test_a_second_run_reads_the_pool_vectors_instead_of_embedding(tmp_path):
    first, second = Counting(), Counting()
    ids = select(DemoVectorCache(tmp_path, identity="emb:a"), first)
    again = select(DemoVectorCache(tmp_path, identity="emb:a"), second)
    assert ids == again == ["p:1", "p:2"]
    assert len(first.texts) == 3 + 1  # the pool and the query
    assert second.texts == ["Anna was born in Paris ."]  # only the query
    (stored,) = tmp_path.glob("*.npy")
    assert stored.name == pool_key("emb:a", [s.text for s in POOL]) + ".npy"
    np.testing.assert_array_equal(np.load(stored), char_embed([s.text for s in POOL]))
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(stored.stat().st_mode) == 0o666 & ~umask
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_changed_pool_or_embedder_embeds_again(tmp_path):
    select(DemoVectorCache(tmp_path, identity="emb:a"), Counting())
    other_embedder, other_pool = Counting(), Counting()
    select(DemoVectorCache(tmp_path, identity="emb:b"), other_embedder)
    changed = [*POOL[:2], Sentence("p:2", "ace05", "ee", "en", "The company fired its chief .")]
    select(DemoVectorCache(tmp_path, identity="emb:a"), other_pool, pool=changed)
    assert len(other_embedder.texts) == len(other_pool.texts) == 4
    assert len(list(tmp_path.glob("*.npy"))) == 3


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
