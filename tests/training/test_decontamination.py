"""Decontamination of the training rows against the evaluation items, near duplicates, and the
Hugging Face dataset card (issue 35), on the project's real evaluation data."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from pipelines.io import read_jsonl
from pipelines.training.dataset_builder import MakeDatasetsConfig, build_datasets
from pipelines.training.dataset_filters import RowFilters
from pipelines.training.dataset_targets import model_targets
from pipelines.training.decontamination import (
    ContaminationConfig,
    ContaminationIndex,
    EvalItem,
    EvaluationFileError,
    ExtraEvaluationFile,
    decontaminate,
    read_extra_file,
)
from pipelines.training.eval_items import kgc_items, system_items, tagging_items
from pipelines.training.near_duplicates import NearDuplicateConfig, near_duplicates
from pipelines.training.rows import normalise_row
from tests.training.conftest import write_jsonl

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "params.yaml"
SYSTEM = "You are a patient Socratic tutor for middle-school students."
CLEAN_REPLY = "Let's think about it together: what do you already know about the numbers in the question?"


def ram2c(i: int, user: str, chosen: str = CLEAN_REPLY, rejected: str = "Just memorise the answer.") -> dict:
    return {"id": f"ram2c-{i}", "source": "ram2c",
            "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
            "chosen": [{"role": "assistant", "content": chosen}],
            "rejected": [{"role": "assistant", "content": rejected}]}  # fmt: skip


def sft(i: int, user: str, answer: str = "<Yes>", source: str = "tagging") -> dict:
    messages = [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return {"id": f"{source}-{i}", "source": source, "messages": messages}


@pytest.fixture(scope="module")
def items() -> list[EvalItem]:
    found, notes = system_items(["tagging", "kgc"], PARAMS, ROOT)
    assert not notes
    return found


def check(rows: list[dict], kind: str, items: list[EvalItem], **cfg) -> tuple[list[dict], list[dict]]:
    clean = [normalise_row(row, kind, "x") for row in rows]
    config = ContaminationConfig(**cfg)
    return decontaminate(clean, kind, index=ContaminationIndex(items, config), action=config.action)


def test_readers_are_the_generation_stages(items):
    from pipelines.config import load_section
    from pipelines.kgc.config import KGCConfig
    from pipelines.tagging.config import TaggingConfig

    tagging = [i for i in items if i.set == "tagging"]
    assert tagging == tagging_items(load_section("tagging", TaggingConfig, PARAMS), ROOT) and len(tagging) >= 4
    assert [i for i in items if i.set == "kgc"] == kgc_items(load_section("kgc", KGCConfig, PARAMS), ROOT)
    assert {i.id.split(":")[0] for i in items if i.set == "kgc"} >= {"ace05", "duee1", "msra"}


def test_planted_items_are_caught_and_clean_rows_kept(items):
    question = next(i for i in items if i.set == "tagging" and i.text.isascii())
    sentence = next(i for i in items if i.set == "kgc" and i.text.isascii() and len(i.text.split()) >= 8)
    chinese = next(i for i in items if i.set == "kgc" and not i.text.isascii() and len(i.text) >= 20)
    planted = f"Here is a similar one: {question.text} Try to draw it first."
    reworded = (
        question.text.replace(" ", "  ")
        .replace(". ", ".")
        .translate(str.maketrans("0123456789", "０１２３４５６７８９"))
    )
    dpo_rows = [ram2c(1, "How do I add fractions with different denominators?", chosen=planted),
                ram2c(2, "Why is the sky blue during the day but red at sunset?")]  # fmt: skip
    kept, matches = check(dpo_rows, "dpo", items)
    assert [r["id"] for r in kept] == ["ram2c-2"]
    assert [(m["row_id"], m["field"], m["item_set"], m["item_id"], m["overlap"]) for m in matches] == [
        ("ram2c-1", "chosen", "tagging", question.id, 1.0)
    ]
    assert reworded != question.text
    sft_rows = [sft(1, f"Extract the entities.\n{sentence.text}", source="kgc"), sft(2, reworded),
                sft(3, f"抽取实体和关系：{chinese.text}", source="kgc"),
                sft(4, "A box holds 38 marbles. How many marbles are there in 6 boxes?")]  # fmt: skip
    kept, matches = check(sft_rows, "sft", items)
    assert [r["id"] for r in kept] == ["tagging-4"]
    found = {m["row_id"]: (m["field"], m["item_id"], m["overlap"]) for m in matches}
    assert found == {"kgc-1": ("prompt", sentence.id, 1.0), "tagging-2": ("prompt", question.id, 1.0),
                     "kgc-3": ("prompt", chinese.id, 1.0)}  # fmt: skip


def test_flag_keeps_the_row_with_its_matches(items):
    question = next(i for i in items if i.set == "tagging")
    kept, matches = check([sft(1, question.text)], "sft", items, action="flag")
    assert len(kept) == 1 and matches[0]["action"] == "flag"
    assert json.loads(kept[0]["meta"])["contamination"][0]["item_id"] == question.id


ENGLISH = (
    "Maria had twelve apples in a basket and gave four of them to her brother before lunch, then she bought "
    "nine more at the market on the way home from school"
)
CHINESE = "小明有十二个苹果，他在午饭前给了弟弟四个，放学回家的路上又在市场买了九个，现在一共有多少个苹果"


@pytest.mark.parametrize(
    ("text", "shared", "caught"),
    [
        (ENGLISH, 22, True),  # 31 words: 19 13-grams; the first 22 words hold 10 of them = 0.53 >= 0.5
        (ENGLISH, 21, False),  # 9 of 19 = 0.47
        (ENGLISH, 12, False),  # shorter than one 13-gram
        (CHINESE, 34, True),  # 44 characters: 25 20-grams; the first 32 characters hold 13 = 0.52
        (CHINESE, 33, False),  # 31 characters: 12 of 25 = 0.48
    ],
)
def test_thresholds_behave_as_documented(text, shared, caught):
    item = EvalItem("extra", "1", text)
    prefix = text[:shared] if text == CHINESE else " ".join(text.split()[:shared])
    _, matches = check([sft(1, f"Look at this: {prefix} and answer.")], "sft", [item])
    assert bool(matches) is caught


def test_short_items_use_shorter_ngrams_and_tiny_ones_are_not_checked():
    items = [EvalItem("extra", "short", "How many stickers are in 2 boxes?"), EvalItem("extra", "tiny", "Why?")]
    index = ContaminationIndex(items, ContaminationConfig())
    assert index.too_short == {"extra": 1} and [i.id for i in index.items] == ["short"]
    assert index.overlaps("so how many stickers are in 2 boxes? think") == {0: 1.0}
    assert index.overlaps("how many stickers are in 3 boxes") == {}


def test_extra_files_from_params_and_a_malformed_one(tmp_path):
    good = write_jsonl(tmp_path / "eval.jsonl", [{"qid": 7, "question": ENGLISH}])
    (tmp_path / "eval.csv").write_text("id,text\na,What is the capital city of France and why was it chosen?\n")
    extra = [{"path": str(good), "text_field": "question", "id_field": "qid"}, {"path": str(tmp_path / "eval.csv")}]
    cfg = MakeDatasetsConfig.model_validate(
        {"inputs": [{"path": "x", "kind": "sft"}], "contamination": {"extra": extra}}
    )
    read = [item for spec in cfg.contamination.extra for item in read_extra_file(spec)]
    assert read == [EvalItem("eval.jsonl", "7", ENGLISH),
                    EvalItem("eval.csv", "2", "What is the capital city of France and why was it chosen?")]  # fmt: skip
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "fine"}) + "\n" + json.dumps({"question": 3}) + "\n")
    with pytest.raises(EvaluationFileError, match=rf"^{bad}:2: field 'question' is int '3', not text; fix"):
        read_extra_file(ExtraEvaluationFile(path=str(bad), text_field="question"))
    bad.write_text('{"question": "fine"}\n{"question": \n')
    with pytest.raises(EvaluationFileError, match=rf"^{bad}:2: not valid JSON"):
        read_extra_file(ExtraEvaluationFile(path=str(bad), text_field="question"))


def test_near_duplicates_keep_the_first_row_and_ignore_the_template():
    template = "Decide whether the question matches the knowledge definition. Answer with <Yes> or <No>. " * 3
    questions = [f"A box holds {n} {thing}. How many {thing} are there in {k} boxes?"
                 for n, thing, k in ((45, "stickers", 2), (51, "cookies", 3), (70, "cookies", 4), (38, "marbles", 6),
                                     (12, "pencils", 5), (64, "buttons", 7), (23, "shells", 8), (90, "cards", 9),
                                     (17, "beads", 2), (33, "stamps", 3))]  # fmt: skip
    rows = [normalise_row(sft(i, template + q, f"Reasoning about {q} gives <Yes>."), "sft", "x")
            for i, q in enumerate(questions)]  # fmt: skip
    twin = sft(99, template + questions[2].replace("?", " ?!"), f"Reasoning about {questions[2]} gives <Yes>.")
    rows.insert(5, normalise_row(twin, "sft", "x"))
    kept, dropped = near_duplicates(rows, "sft", NearDuplicateConfig())
    assert dropped == [{"id": "tagging-99", "source": "tagging", "kept": "tagging-2", "jaccard": 1.0}]
    assert len(kept) == 10
    again = near_duplicates(rows[::-1], "sft", NearDuplicateConfig())[1]
    assert [(d["id"], d["kept"]) for d in again] == [("tagging-2", "tagging-99")]  # the first one read is kept


def build(tmp_path, tokenizer, sft_rows, dpo_rows, **cfg):
    written = {"sft": write_jsonl(tmp_path / "gen" / "tagging" / "sft.jsonl", sft_rows),
               "dpo": write_jsonl(tmp_path / "gen" / "ram2c" / "dpo.jsonl", dpo_rows)}  # fmt: skip
    inputs = [{"path": str(path), "kind": kind} for kind, path in written.items()]
    config = MakeDatasetsConfig.model_validate(
        {
            "inputs": inputs,
            "output_dir": str(tmp_path / "train"),
            "reports_dir": str(tmp_path / "reports"),
            "eval_fraction": 0.25,
        }
        | cfg  # fmt: skip
    )
    targets = model_targets("the-qwen-tokenizer", max_length=400)
    return build_datasets(config, targets, tokenizers={"sft": tokenizer, "dpo": tokenizer}, eval_items=[])


def test_make_datasets_drops_contaminated_rows_and_writes_card(tmp_path, qwen_tokenizer):
    from datasets import load_dataset

    extra = write_jsonl(tmp_path / "extra.jsonl", [{"text": ENGLISH}])
    sft_rows = [sft(i, f"Is {n} times {k} a two-digit by one-digit product?") for i, (n, k) in
                enumerate(((45, 2), (51, 3), (70, 4), (38, 6), (12, 5), (64, 7)))]  # fmt: skip
    sft_rows.append(sft(9, f"Read this: {ENGLISH}"))
    topics = ["seasons on Earth", "adding fractions", "photosynthesis in leaves", "the water cycle",
              "prime numbers", "gravity on the Moon", "volcanoes and plates", "electric circuits"]  # fmt: skip
    dpo_rows = [ram2c(i, f"Can you explain {t} to me step by step, please? I keep getting confused about it.")
                for i, t in enumerate(topics)]  # fmt: skip
    metrics = build(tmp_path, qwen_tokenizer, sft_rows, dpo_rows, contamination={"extra": [{"path": str(extra)}]})
    assert metrics["counts"]["sft"]["removed"]["contaminated"] == 1
    assert metrics["counts"]["sft"]["train"] + metrics["counts"]["sft"]["eval"] == 6
    assert metrics["contamination"] | {"items_checked": None} == {
        "action": "drop", "matches": 1, "rows": 1, "by_item_set": {"extra.jsonl": 1}, "items_checked": None,
        "items_too_short": {}}  # fmt: skip
    assert metrics["contamination"]["items_checked"]["extra.jsonl"] == 1
    assert metrics["contamination"]["items_checked"]["tutoring"] >= 2  # the DPO eval prompts
    assert [(m["row_id"], m["item_set"]) for m in read_jsonl(tmp_path / "train" / "contamination.jsonl")] == [
        ("tagging-9", "extra.jsonl")
    ]
    assert "1 match(es) in 1 row(s), action `drop`" in (tmp_path / "train" / "DATA_CARD.md").read_text()
    card = (tmp_path / "train" / "sft" / "README.md").read_text()
    assert "| contaminated | 1 | `tagging-9: prompt holds extra.jsonl item 1 (100%)` |" in card
    assert "task_categories:\n- text-generation" in card and "language:\n- en" in card
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = load_dataset(str(tmp_path / "train" / "dpo"))
    assert set(loaded) == {"train", "eval"} and len(loaded["train"]) + len(loaded["eval"]) == 8
    assert "| chosen |" in (tmp_path / "train" / "dpo" / "README.md").read_text()


def test_dpo_train_rows_holding_a_held_out_tutoring_prompt_are_dropped(tmp_path, qwen_tokenizer):
    student = "My teacher said the Earth is tilted, but why does that make summer warmer than winter here?"
    held_out = normalise_row(ram2c(9, student), "dpo", "ram2c")
    holds_it = normalise_row(ram2c(10, f"Earlier I asked: {student} Now: why are the poles cold?"), "dpo", "ram2c")
    other = normalise_row(ram2c(11, "Can you explain photosynthesis in leaves to me step by step?"), "dpo", "ram2c")
    filters = RowFilters(NearDuplicateConfig(), ContaminationConfig())
    assert filters.tutoring([holds_it, other], [held_out, holds_it, other]) == [other]
    assert [(m["row_id"], m["field"], m["item_set"], m["item_id"]) for m in filters.matches] == [
        ("ram2c-10", "prompt", "tutoring", "ram2c-9")
    ]
    # through the stage: no DPO train row holds the prompt of a held-out row
    topics = ["seasons on Earth", "adding fractions", "photosynthesis in leaves", "the water cycle", "prime numbers"]
    rows = [ram2c(i, f"Can you explain {t} to me step by step? I keep getting confused.") for i, t in enumerate(topics)]
    rows += [ram2c(9, student), ram2c(10, f"Earlier I asked: {student} Now: why are the poles cold?")]
    build(tmp_path, qwen_tokenizer, [sft(1, "What is 2 + 2 in a sentence?")], rows, eval_fraction=0.5)
    from datasets import load_from_disk

    data = load_from_disk(str(tmp_path / "train" / "dpo"))
    items = [EvalItem("tutoring", r["id"], r["prompt"][-1]["content"]) for r in data["eval"]]
    index = ContaminationIndex(items, ContaminationConfig())
    assert all(not index.overlaps(r["prompt"][-1]["content"]) for r in data["train"])


def test_sft_train_rows_holding_a_held_out_tutoring_prompt_are_dropped(tmp_path, qwen_tokenizer):
    # generate_ram2c's sft.jsonl as an SFT input: the chosen replies of the prompts its DPO pairs hold
    topics = ["seasons on Earth", "adding fractions", "photosynthesis in leaves", "the water cycle",
              "prime numbers", "gravity on the Moon", "volcanoes and plates", "electric circuits"]  # fmt: skip
    prompts = [f"Can you explain {t} to me step by step, please? I keep getting confused about it." for t in topics]
    dpo_rows = [ram2c(i, prompt) for i, prompt in enumerate(prompts)]
    sft_rows = [sft(i, prompt, CLEAN_REPLY, source="ram2c") for i, prompt in enumerate(prompts)]
    metrics = build(tmp_path, qwen_tokenizer, sft_rows, dpo_rows, eval_fraction=0.25)
    from datasets import load_from_disk

    dpo, chat = load_from_disk(str(tmp_path / "train" / "dpo")), load_from_disk(str(tmp_path / "train" / "sft"))
    held_out = {r["prompt"][-1]["content"] for r in dpo["eval"]}
    trained = {m["content"] for r in chat["train"] for m in r["prompt"] if m["role"] == "user"}
    assert held_out and not held_out & trained  # no evaluated tutoring prompt in the SFT training rows
    dropped = metrics["counts"]["sft"]["removed"]["contaminated"]
    assert dropped >= 1 and metrics["counts"]["sft"]["train"] + metrics["counts"]["sft"]["eval"] == 8 - dropped
    matches = read_jsonl(tmp_path / "train" / "contamination.jsonl")
    assert [(m["kind"], m["item_set"]) for m in matches] == [("sft", "tutoring")] * dropped  # DPO's own: none
    rejected = read_jsonl(tmp_path / "reports" / "rejected.jsonl")
    assert [r["kind"] for r in rejected] == ["sft"] * dropped


def test_mathdial_as_an_extra_evaluation_file():
    mathdial = ROOT.parent / "shared" / "data" / "tutoring" / "mathdial_test.jsonl"
    if not mathdial.is_file():
        pytest.skip(f"{mathdial} is absent (the ../shared data)")
    generated = ROOT / "data" / "generated" / "ram2c" / "dpo.jsonl"
    generated = generated if generated.is_file() else ROOT / "data" / "demo" / "ram2c" / "dpo.jsonl"
    items = read_extra_file(ExtraEvaluationFile(path=str(mathdial), text_field="question", id_field="qid"))
    rows = [normalise_row(r, "dpo", "ram2c") for r in read_jsonl(generated)]
    _, matches = decontaminate(rows, "dpo", index=ContaminationIndex(items, ContaminationConfig()), action="flag")
    assert len(items) > 100 and rows
    print(f"MathDial test items: {len(items)}; RAM2C rows of {generated}: {len(rows)}; overlapping rows: "
          f"{len({m['row_id'] for m in matches})}")  # fmt: skip


def test_stage_names_file_and_line_of_a_malformed_extra_file(tmp_path, monkeypatch, capsys):
    import yaml

    from stages.make_datasets import main

    bad = tmp_path / "eval.csv"
    bad.write_text("id,question\n1,What is the capital city of France and why?\n")
    params = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    params["make_datasets"]["inputs"] = [{"path": str(ROOT / "data/demo/ram2c/dpo.jsonl"), "kind": "dpo"}]
    params["make_datasets"]["contamination"] |= {"systems": [], "extra": [{"path": str(bad)}]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["--params", "params.yaml"]) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"error: {bad}:2: field 'text' is missing, not text; fix the line or set ")
