"""The simulated server's replies are valid for every JSON schema the teams send: jsonschema
accepts each drawn instance and the team's own pydantic model reads it back."""

from __future__ import annotations

import random
import re

import jsonschema
import pytest

from pipelines.evaluation.hts.agents.pairwise_judge import PairwiseOutput
from pipelines.kgc.agents.answer_bounds import candidate_spans
from pipelines.kgc.agents.experts import expert_role
from pipelines.kgc.schema import SCHEMA_DIR, load_schema
from pipelines.ram2c.agents.analyst import AnalysisOut, analysed_revision_output
from pipelines.ram2c.agents.ballot import ballot_output
from pipelines.ram2c.agents.reply import ReplyOut
from pipelines.ram2c.agents.topic_writer import QuestionOut
from pipelines.ram2c.agents.voter import VoteOut
from pipelines.retrieval.rewrite import RewritesOutput
from pipelines.tagging.agents.numerical_judge import NUMBER_TEXT, ArgsOutput, program_output
from pipelines.tagging.agents.planner import plan_output
from pipelines.tagging.agents.semantic_judge import JudgmentOutput
from pipelines.tagging.agents.solver import SolutionOutput
from tests.support.simserver.schema_sample import UnsupportedSchema, sample
from tests.support.simserver.text import WORDS_EN, WORDS_ZH

MODELS = {
    "tagging.planner": plan_output(5),
    "tagging.solver": SolutionOutput,
    "tagging.semantic_judge": JudgmentOutput,
    "tagging.arg_extractor": ArgsOutput,
    "tagging.program_writer": program_output({"total": 12, "price": 3.5, "prices": [1, 2, 3]}),
    "ram2c.topic_writer": QuestionOut,
    "ram2c.reply": ReplyOut,
    "ram2c.voter": VoteOut,
    "ram2c.ballot": ballot_output(5),
    "ram2c.analyst": AnalysisOut,
    "ram2c.analyst_reviser": analysed_revision_output(240),
    "evaluation.pairwise_judge": PairwiseOutput,
    "retrieval.rewriter": RewritesOutput,
}
SENTENCE_EN = "Lionel Messi was born in Rosario , Argentina , and joined FC Barcelona in 2000 ."
SENTENCE_ZH = "梅西出生于阿根廷罗萨里奥，2000年加入巴塞罗那足球俱乐部。"


def kgc_schemas():
    for path in sorted(SCHEMA_DIR.glob("*.json")):
        schema = load_schema(path.stem)
        sentence, language = (SENTENCE_ZH, "zh") if schema.language == "zh" else (SENTENCE_EN, "en")
        spans = candidate_spans(sentence, language=language, max_chars=12)
        for reason in (True, False):
            yield f"kgc.{path.stem}.{schema.task}.reason={reason}.grounded", expert_role(schema.task).answer_schema(
                schema, reason=reason, spans=spans
            ), spans
            yield f"kgc.{path.stem}.{schema.task}.reason={reason}.free", expert_role(schema.task).answer_schema(
                schema, reason=reason
            ), None


def test_every_kgc_schema_is_covered():
    names = [name for name, _, _ in kgc_schemas()]
    assert len(names) >= 4 * 6 and any(".ee." in n for n in names) and any(".grounded" in n for n in names)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_team_models_read_back_what_is_drawn(name):
    model = MODELS[name]
    schema = model.model_json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(name)
    for i in range(60):
        value = sample(schema, rng, WORDS_ZH if i % 3 == 0 else WORDS_EN)
        errors = list(validator.iter_errors(value))
        assert not errors, (name, value, errors[0].message)
        model.model_validate(value)  # the team's own model accepts it (raises otherwise)


@pytest.mark.parametrize("name, schema, spans", list(kgc_schemas()), ids=lambda v: v if isinstance(v, str) else "")
def test_kgc_answer_schemas_with_grounded_span_enums(name, schema, spans):
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(name)
    seen_items = 0
    for _ in range(40):
        value = sample(schema, rng, WORDS_EN)
        errors = list(validator.iter_errors(value))
        assert not errors, (name, value, errors[0].message)
        for items in value.values():
            if isinstance(items, list):
                seen_items += len(items)
                if spans is not None:  # every span is one of the sentence's own substrings
                    for item in items:
                        for key in ("text", "head", "tail", "trigger"):
                            if key in item:
                                assert item[key] in spans
    assert seen_items > 0


def test_patterns_and_lengths():
    rng = random.Random(0)
    for _ in range(200):
        text = sample({"type": "string", "pattern": NUMBER_TEXT}, rng, WORDS_EN)
        assert re.search(NUMBER_TEXT, text), text
        bounded = sample({"type": "string", "minLength": 3, "maxLength": 20}, rng, WORDS_EN)
        assert 3 <= len(bounded) <= 20 and '"' not in bounded and "\\" not in bounded
    question = sample(QuestionOut.model_json_schema(), rng, WORDS_EN)["question"]
    assert question.endswith("?")


def test_same_seed_same_reply_and_impossible_schemas_are_named():
    schema = analysed_revision_output(240).model_json_schema()
    assert sample(schema, random.Random("x"), WORDS_EN) == sample(schema, random.Random("x"), WORDS_EN)
    assert sample(schema, random.Random("x"), WORDS_EN) != sample(schema, random.Random("y"), WORDS_EN)
    with pytest.raises(UnsupportedSchema, match="empty enum"):
        sample({"type": "object", "properties": {"a": {"enum": []}}, "required": ["a"]}, random.Random(0), WORDS_EN)
    with pytest.raises(UnsupportedSchema, match="no multiple"):
        sample({"type": "integer", "minimum": 3, "maximum": 2}, random.Random(0), WORDS_EN)
