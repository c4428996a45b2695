"""Per-request seeds: a role's ``seed`` combined with the request's identity.

A role's seed (``llm.roles.<role>.sampling.seed``, an HTS judge's ``seed``) names a reproducible
*run*, not one random stream: sent as is, every request of the role would draw the same random
numbers (a judge whose every call samples its verdict from the same draws answers alike whatever
the content). :class:`~pipelines.llm.client.LLM` therefore sends each request
``request_seed(role seed, request key)``, where the key is the request cache key of the request
as asked (model, messages, sampling with the role's seed, sample index, attempt, tag): reruns
draw identically, different requests independently, and the cache key, computed from the role's
seed as before, still replays. Every backend receives the derived seed: the transformers
backend seeds each choice's generator from it, vLLM gets it as ``SamplingParams.seed`` and HTTP
servers as the body's ``seed``.
"""

from __future__ import annotations

import dataclasses
import hashlib

from pipelines.llm.types import SamplingParams

SEED_BITS = 31
"""Derived seeds are below 2**31: every server accepts them (some reject 64-bit seeds)."""


def request_seed(seed: int, key: str) -> int:
    """The seed one request draws with: sha256 of the role's ``seed`` and the request's ``key``."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (1 << SEED_BITS)


def per_request(params: SamplingParams, key: str | None) -> SamplingParams:
    """``params`` with :func:`request_seed` in place of the role's seed (unchanged when unseeded or keyless)."""
    if params.seed is None or key is None:
        return params
    return dataclasses.replace(params, seed=request_seed(params.seed, key))
