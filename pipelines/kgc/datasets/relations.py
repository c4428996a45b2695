"""Relation-extraction files: NYT11-HRL (JSON lines ``sentText``, ``relationMentions``), TACRED /
Re-TACRED (a JSON array or JSON lines: ``token``, ``subj_start/end``, ``obj_start/end`` inclusive,
``relation``; ``no_relation`` is not a triple) and DuIE 2.0 (``text``, ``spo_list`` whose ``object``
is ``{"@value": ..., <qualifier>: ...}``; the qualifiers of a complex object are kept).

A head or tail that does not occur in its sentence is counted (``bad_spans``) and kept in the gold
set; a label is read through the schema's names and aliases (:meth:`Schema.label`: NYT11-HRL's
Freebase paths and the plain-English labels of its re-split, ``place lived``), and one outside the
schema is counted (``unknown_labels``) and left out of the gold set. Gold is scored by text.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pipelines.kgc.datasets.base import FileCounts, ReaderError, field_of, json_lines
from pipelines.kgc.schema import Schema, Sentence, Triple

NOT_A_RELATION = {"None", "NA", "no_relation"}


def _add(triples: list[Triple], triple: Triple, text: str, counts: FileCounts, line: int, schema: Schema) -> None:
    if triple.relation in NOT_A_RELATION:
        return
    relation = schema.label(triple.relation)
    if relation not in schema.relations:
        counts.note_unknown(triple.relation, line, f"relation {triple.relation!r} is not in schema {schema.name}")
        return
    triple = replace(triple, relation=relation)
    for span in (triple.head, triple.tail, *(v for _, v in triple.qualifiers)):
        if span not in text:
            counts.note("bad_spans", line, f"{span!r} does not occur in the sentence")
    if triple not in triples:
        triples.append(triple)


def read_nyt(path: Path | str, schema: Schema, *, dataset: str | None = None) -> tuple[list[Sentence], FileCounts]:
    name, counts, sentences = dataset or schema.name, FileCounts(str(path)), []
    for line, row in json_lines(path):
        text = field_of(row, "sentText", path, line).strip()
        triples: list[Triple] = []
        for mention in field_of(row, "relationMentions", path, line, list):
            if not isinstance(mention, dict):
                raise ReaderError(f"{path}:{line}: relationMentions holds a non-object {mention!r:.40}")
            head, tail, label = (field_of(mention, k, path, line) for k in ("em1Text", "em2Text", "label"))
            _add(triples, Triple(head.strip(), label, tail.strip()), text, counts, line, schema)
        counts.sentences += 1
        counts.items += len(triples)
        sentences.append(Sentence(f"{name}:{line}", name, "re", schema.language, text, triples=triples))
    return sentences, counts


def read_tacred(path: Path | str, schema: Schema, *, dataset: str | None = None) -> tuple[list[Sentence], FileCounts]:
    name, counts, sentences = dataset or schema.name, FileCounts(str(path)), []
    for line, row in json_lines(path):
        tokens = field_of(row, "token", path, line, list)
        text = " ".join(tokens)
        bounds = [field_of(row, k, path, line, int) for k in ("subj_start", "subj_end", "obj_start", "obj_end")]
        relation = field_of(row, "relation", path, line)
        triples: list[Triple] = []
        if not all(0 <= b < len(tokens) for b in bounds) or bounds[0] > bounds[1] or bounds[2] > bounds[3]:
            counts.note("bad_spans", line, f"token span {bounds} outside the {len(tokens)} tokens")
        else:
            head = " ".join(tokens[bounds[0] : bounds[1] + 1])
            tail = " ".join(tokens[bounds[2] : bounds[3] + 1])
            _add(triples, Triple(head, relation, tail), text, counts, line, schema)
        counts.sentences += 1
        counts.items += len(triples)
        sid = f"{name}:{row.get('id', line)}"
        sentences.append(Sentence(sid, name, "re", schema.language, text, triples=triples))
    return sentences, counts


def read_duie(path: Path | str, schema: Schema, *, dataset: str | None = None) -> tuple[list[Sentence], FileCounts]:
    name, counts, sentences = dataset or schema.name, FileCounts(str(path)), []
    for line, row in json_lines(path):
        text = field_of(row, "text", path, line)
        triples: list[Triple] = []
        for spo in field_of(row, "spo_list", path, line, list):
            if not isinstance(spo, dict):
                raise ReaderError(f"{path}:{line}: spo_list holds a non-object {spo!r:.40}")
            subject, predicate = field_of(spo, "subject", path, line), field_of(spo, "predicate", path, line)
            obj = field_of(spo, "object", path, line, (dict, str))
            if isinstance(obj, str):
                value, qualifiers = obj, ()
            else:
                value = field_of(obj, "@value", path, line)
                qualifiers = tuple(sorted((k, str(v)) for k, v in obj.items() if k != "@value"))
            _add(triples, Triple(subject, predicate, value, qualifiers), text, counts, line, schema)
        counts.sentences += 1
        counts.items += len(triples)
        sentences.append(Sentence(f"{name}:{line}", name, "re", schema.language, text, triples=triples))
    return sentences, counts
