"""Scripted replies for every RAM2C agent (tests only) and an in-memory retriever double.

The replies make the flow visible: a reviser (or an analyst_reviser, after its analysis) answers
``<G>:<expert>[<current reply>]`` and the synthesizer keeps version 1, so the chosen reply spells
the order the groups ran in."""

from __future__ import annotations

import re

import numpy as np

from pipelines.llm.client import LLM
from pipelines.llm.scripted import ScriptedBackend
from pipelines.retrieval.retriever import Hit, RetrievalResult

GROUP_LETTER = {
    "language teachers": "T",
    "educational psychologists": "P",
    "safety and ethics experts": "E",
    "语文教师": "T",
    "教育心理学家": "P",
    "安全与伦理专家": "E",
}


def _field(text: str, label: str) -> str:
    match = re.search(rf"^{label}[:：]\s*(.*)$", text, re.M)
    return match.group(1).strip() if match else ""


def _group(system: str) -> str:
    return next(letter for name, letter in GROUP_LETTER.items() if name in system)


def _expert(system: str) -> str:
    return re.match(r"(?:You are |你是)(.+?)[,，]", system).group(1)


def reviser(messages) -> str:
    system, user = messages[0]["content"], messages[-1]["content"]
    current = _field(user, "Current reply") or _field(user, "当前回复")
    return f"{_group(system)}:{_expert(system)}[{current}]"


def analysed_revision(messages) -> str:
    """Analysis, then the ``reviser`` reply, in the text form of ``analyst_reviser``."""
    label = ("分析", "回复") if "请分两部分作答" in messages[0]["content"] else ("Analysis", "Reply")
    return f"{label[0]}: The student feels curious; the reply could ask more.\n{label[1]}: {reviser(messages)}"


def synthesizer(messages) -> str:
    user = messages[-1]["content"]
    return _field(user, "Version 1") or _field(user, "版本1")


def topic(messages) -> str:
    level = _field(messages[-1]["content"], "Level") or _field(messages[-1]["content"], "难度层次")
    chapter = re.search(r"chapter (\d+)|第(\d+)章", messages[-1]["content"])
    return f"Question about chapter {chapter.group(1) or chapter.group(2)} at {level.split(' ')[0]}?"


def vote_rule(accept: set[str]):
    """Voters say yes to documents whose text contains one of ``accept`` (every expert alike)."""

    def reply(messages) -> str:
        document = messages[-1]["content"].split("Document:", 1)[-1].split("文档：", 1)[-1]
        return "yes, useful" if any(a in document for a in accept) else "no"

    return reply


def ballot_rule(accept: set[str]):
    """Ballots: ``1: yes`` for each numbered document whose text contains one of ``accept``."""

    def reply(messages) -> str:
        user = messages[-1]["content"]
        blocks = re.findall(r"^(?:Document |文档)(\d+)[:：]\n(.*)$", user, re.M)
        return "\n".join(f"{n}: {'yes' if any(a in text for a in accept) else 'no'}" for n, text in blocks)

    return reply


def rules(accept: set[str] = frozenset({"good"})):
    return [
        (r"You write discussion questions|你为一位和中小学生", topic),
        (r"You play a student|你扮演一名", "I think he was brave because he went to sea."),
        (r"You are a literature teacher discussing|你是一位语文老师", "Nice answer. Why did he go?"),
        (r"Judge one document only|请只从你自己的维度", vote_rule(set(accept))),
        (r"Judge every document|逐篇判断", ballot_rule(set(accept))),
        (r"Rewrite the search query|检索知识库", "1. why he went to sea\n2. reasons for sailing"),
        (r"Answer in two parts|请分两部分作答", analysed_revision),
        (r"analyse explicitly|作出明确的分析", "The student feels curious; the reply could ask more."),
        (r"rewrite the teacher's reply|请根据你的分析改写", reviser),
        (r"You merge several improved versions|合并成一份最终回复", synthesizer),
    ]


class FakeEmbedder:
    """Bag-of-words vectors (hashing trick): equal texts are identical, different ones far apart."""

    def encode_queries(self, texts):
        from pipelines.retrieval.embedders import Encoded

        vectors = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                vectors[i, sum(map(ord, word)) % 64] += 1
        return Encoded(vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12))


class FakeRetriever:
    """Returns fixed documents per retrieval group; records every query."""

    def __init__(self, docs: dict[str, list[str]], rewriter=None):
        self.docs = docs
        self.queries: list[tuple[str, str]] = []
        self.rewrites: list[list[str] | None] = []
        self.languages: list[str | None] = []  # the language each retrieval kept to
        self.embedder = FakeEmbedder()
        self.rewriter = rewriter

    def kinds_for(self, group, kinds):
        return [f"kind-of-{group}"]

    async def retrieve(self, query, *, group=None, kinds=None, where=None, top_k=None, rewrites=None, language=None):
        self.queries.append((group, query))
        self.rewrites.append(rewrites)
        self.languages.append(language)
        texts = self.docs.get(group, [])[: top_k or 5]
        scores = [{"dense": 1.0 - i / 10, "rrf": 1 / (60 + i)} for i in range(len(texts))]
        hits = [
            Hit(f"{group}/{i}", t, f"kind-of-{group}", "fake", {}, s, [query])
            for i, (t, s) in enumerate(zip(texts, scores, strict=True))
        ]
        return RetrievalResult(query, hits, [query], self.kinds_for(group, kinds), group, 0.001)


DOCS = {
    "teacher": ["good teaching idea", "plain text", "good example"],
    "psychologist": ["good encouragement", "noise"],
    "ethics": ["noise only", "good safe reply"],
}


def scripted_llm_for(backend: ScriptedBackend):
    roles: list[str] = []

    def llm_for(role: str) -> LLM:
        roles.append(role)
        return LLM(backend, role=role)

    llm_for.roles = roles
    return llm_for


def backend(accept=frozenset({"good"})) -> ScriptedBackend:
    return ScriptedBackend(rules(accept))
