"""Write the project's own small KGC demo set (English and Chinese) in the official file formats.

    python data/kgc/make_demo.py        # rewrites the files next to this script

Each sentence is written here once, readable, with its annotations as (type, text) pairs; the
offsets, BIO tags and token indices are computed, so the files are consistent by construction.
The sentences are written by the project (school-subject and news-style facts), not taken from
any dataset.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent

NER_EN = [
    ("Marie Curie won the Nobel Prize in Paris .", [("PER", "Marie Curie"), ("MISC", "Nobel Prize"), ("LOC", "Paris")]),
    ("Isaac Newton taught at Cambridge University .", [("PER", "Isaac Newton"), ("ORG", "Cambridge University")]),
    ("The Amazon river flows through Brazil .", [("LOC", "Amazon"), ("LOC", "Brazil")]),
    ("NASA launched the Apollo missions from Florida .", [("ORG", "NASA"), ("MISC", "Apollo"), ("LOC", "Florida")]),
    (
        "Charles Darwin sailed on the Beagle to the Galapagos Islands .",
        [("PER", "Charles Darwin"), ("MISC", "Beagle"), ("LOC", "Galapagos Islands")],
    ),
    (
        "Ada Lovelace worked with Charles Babbage in London .",
        [("PER", "Ada Lovelace"), ("PER", "Charles Babbage"), ("LOC", "London")],
    ),
    (
        "Born in Rosario , Argentina in 1987 Lionel Messi is one of the greatest football players .",
        [("LOC", "Rosario"), ("LOC", "Argentina"), ("PER", "Lionel Messi")],
    ),
]
NER_ZH = [
    ("居里夫人在巴黎获得诺贝尔奖。", [("PER", "居里夫人"), ("LOC", "巴黎")]),
    ("鲁迅曾在北京大学任教。", [("PER", "鲁迅"), ("ORG", "北京大学")]),
    ("长江流经上海。", [("LOC", "长江"), ("LOC", "上海")]),
    ("中国科学院位于北京。", [("ORG", "中国科学院"), ("LOC", "北京")]),
    ("祖冲之计算了圆周率。", [("PER", "祖冲之")]),
    ("李白出生于碎叶城。", [("PER", "李白"), ("LOC", "碎叶城")]),
]
RE_EN = [
    ("Paris is the capital of France .", [("France", "/location/country/capital", "Paris")]),
    (
        "Marie Curie , who was born in Warsaw , lived in Paris for most of her life .",
        [
            ("Marie Curie", "/people/person/place_of_birth", "Warsaw"),
            ("Marie Curie", "/people/person/place_lived", "Paris"),
        ],
    ),
    (
        "Steve Jobs founded Apple with Steve Wozniak .",
        [
            ("Apple", "/business/company/founders", "Steve Jobs"),
            ("Apple", "/business/company/founders", "Steve Wozniak"),
        ],
    ),
    (
        "Brooklyn is a borough of New York City in the state of New York .",
        [("New York", "/location/location/contains", "Brooklyn")],
    ),
    (
        "Albert Einstein died in Princeton , New Jersey .",
        [
            ("Albert Einstein", "/people/deceased_person/place_of_death", "Princeton"),
            ("New Jersey", "/location/location/contains", "Princeton"),
        ],
    ),
    (
        "Born in Rosario , Argentina in 1987 Lionel Messi is one of the greatest football players .",
        [
            ("Lionel Messi", "/people/person/place_of_birth", "Rosario"),
            ("Argentina", "/location/location/contains", "Rosario"),
        ],
    ),
]
RE_ZH = [
    ("《红楼梦》的作者是曹雪芹。", [("红楼梦", "作者", "曹雪芹")]),
    ("北京是中国的首都。", [("中国", "首都", "北京")]),
    ("鲁迅毕业于仙台医学专门学校，国籍是中国。", [("鲁迅", "毕业院校", "仙台医学专门学校"), ("鲁迅", "国籍", "中国")]),
    ("电影《流浪地球》由郭帆执导，吴京主演。", [("流浪地球", "导演", "郭帆"), ("流浪地球", "主演", "吴京")]),
    ("阿里巴巴的创始人是马云。", [("阿里巴巴", "创始人", "马云")]),
]
EE_EN = [
    (
        "Born in Rosario , Argentina in 1987 Lionel Messi is one of the greatest football players .",
        [("Life:Be-Born", "Born", [("Place", "Rosario"), ("Time", "1987"), ("Person", "Lionel Messi")])],
    ),
    (
        "Li Shaomin was convicted of espionage and deported .",
        [
            ("Justice:Convict", "convicted", [("Defendant", "Li Shaomin"), ("Crime", "espionage")]),
            ("Justice:Extradite", "deported", [("Person", "Li Shaomin")]),
        ],
    ),
    (
        "Rebels attacked the capital on Monday .",
        [("Conflict:Attack", "attacked", [("Attacker", "Rebels"), ("Target", "capital"), ("Time", "Monday")])],
    ),
    (
        "The company hired Anna Smith as its new director in May .",
        [
            (
                "Personnel:Start-Position",
                "hired",
                [("Entity", "company"), ("Person", "Anna Smith"), ("Position", "director"), ("Time", "May")],
            )
        ],
    ),
    ("The two leaders met in Geneva .", [("Contact:Meet", "met", [("Entity", "leaders"), ("Place", "Geneva")])]),
]
EE_ZH_SCHEMA = {
    "人生-出生": ["时间", "地点", "出生者"],
    "司法行为-入狱": ["时间", "入狱者", "刑期"],
    "竞赛行为-胜负": ["时间", "胜者", "败者", "赛事名称"],
    "组织关系-裁员": ["时间", "裁员方", "裁员人数"],
    "灾害/意外-地震": ["时间", "震中", "震级"],
}
EE_ZH = [
    (
        "1987年梅西出生于阿根廷罗萨里奥。",
        [("人生-出生", "出生", [("时间", "1987年"), ("出生者", "梅西"), ("地点", "阿根廷罗萨里奥")])],
    ),
    (
        "某公司今年裁员200人。",
        [("组织关系-裁员", "裁员", [("裁员方", "某公司"), ("时间", "今年"), ("裁员人数", "200人")])],
    ),
    (
        "中国队在决赛中击败了日本队。",
        [("竞赛行为-胜负", "击败", [("胜者", "中国队"), ("败者", "日本队"), ("赛事名称", "决赛")])],
    ),
    ("昨天云南发生5.0级地震。", [("灾害/意外-地震", "地震", [("时间", "昨天"), ("震中", "云南"), ("震级", "5.0级")])]),
    ("他因诈骗被判入狱三年。", [("司法行为-入狱", "入狱", [("入狱者", "他"), ("刑期", "三年")])]),
]


def bio_lines(tokens: list[str], joiner: str, spans: list[tuple[str, str]], extra: str) -> list[str]:
    text = joiner.join(tokens)
    starts, position = [], 0
    for token in tokens:
        starts.append(position)
        position += len(token) + len(joiner)
    tags = ["O"] * len(tokens)
    cursor = 0
    for kind, span in spans:
        begin = text.index(span, cursor if text.find(span, cursor) >= 0 else 0)
        inside = [i for i, s in enumerate(starts) if begin <= s < begin + len(span)]
        for n, i in enumerate(inside):
            tags[i] = ("B-" if n == 0 else "I-") + kind
    return [f"{t}{extra}{tag}" for t, tag in zip(tokens, tags, strict=True)]


def main() -> None:
    lines = ["-DOCSTART- -X- -X- O", ""]
    for text, spans in NER_EN:
        lines += bio_lines(text.split(" "), " ", spans, " NN O ") + [""]
    (HERE / "ner_en.conll").write_text("\n".join(lines), encoding="utf-8")
    lines = []
    for text, spans in NER_ZH:
        lines += bio_lines(list(text), "", spans, " ") + [""]
    (HERE / "ner_zh.msra.txt").write_text("\n".join(lines), encoding="utf-8")
    rows = [
        {"sentText": t, "relationMentions": [{"em1Text": h, "em2Text": o, "label": r} for h, r, o in ts]}
        for t, ts in RE_EN
    ]
    write_jsonl(HERE / "re_en.nyt.jsonl", rows)
    rows = [
        {"text": t, "spo_list": [{"subject": h, "predicate": r, "object": {"@value": o}} for h, r, o in ts]}
        for t, ts in RE_ZH
    ]
    write_jsonl(HERE / "re_zh.duie.jsonl", rows)
    write_jsonl(HERE / "ee_en.oneie.jsonl", [oneie(i, t, evs) for i, (t, evs) in enumerate(EE_EN)])
    write_jsonl(HERE / "ee_zh.duee.jsonl", [duee(i, t, evs) for i, (t, evs) in enumerate(EE_ZH)])
    schema = [
        {"event_type": k, "role_list": [{"role": r} for r in v], "class": k.split("-")[0]}
        for k, v in EE_ZH_SCHEMA.items()
    ]
    write_jsonl(HERE / "ee_zh.duee_schema.jsonl", schema)


def oneie(index: int, text: str, events) -> dict:
    tokens = text.split(" ")

    def token_span(span: str) -> tuple[int, int]:
        words = span.split(" ")
        for i in range(len(tokens)):
            if tokens[i : i + len(words)] == words:
                return i, i + len(words)
        raise ValueError(span)

    mentions, event_rows = [], []
    for e, (kind, trigger, args) in enumerate(events):
        s, t = token_span(trigger)
        arguments = []
        for role, span in args:
            a, b = token_span(span)
            mention_id = f"demo-{index}-E{len(mentions)}"
            mentions.append({"id": mention_id, "start": a, "end": b, "text": span, "entity_type": "ENT"})
            arguments.append({"entity_id": mention_id, "text": span, "role": role})
        event_rows.append(
            {
                "id": f"demo-{index}-EV{e}",
                "event_type": kind,
                "trigger": {"start": s, "end": t, "text": trigger},
                "arguments": arguments,
            }
        )
    return {
        "doc_id": "demo",
        "sent_id": f"demo-{index}",
        "tokens": tokens,
        "sentence": text,
        "entity_mentions": mentions,
        "event_mentions": event_rows,
    }


def duee(index: int, text: str, events) -> dict:
    event_list = []
    for kind, trigger, args in events:
        arguments = [
            {"argument_start_index": text.index(span), "role": role, "argument": span, "alias": []}
            for role, span in args
        ]
        event_list.append(
            {
                "event_type": kind,
                "trigger": trigger,
                "trigger_start_index": text.index(trigger),
                "arguments": arguments,
                "class": kind.split("-")[0],
            }
        )
    return {"text": text, "id": f"demo-zh-{index}", "event_list": event_list}


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
