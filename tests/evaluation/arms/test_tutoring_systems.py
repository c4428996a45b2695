"""The tutoring systems and the RAM2C paper's Tables 1-3 on scripted models: the tuned model, the
base model, a reference model (GLM) and RAM2C team variants rewriting the reference's drafts, each
answering every prompt once; every comparison judged with balanced positions by two distinct
judge models; the three tables' exact cells; the strict systems and comparisons config."""

from __future__ import annotations

import asyncio
import re

import pytest

from pipelines.config import ConfigError, validate_section
from pipelines.errors import StageError
from pipelines.evaluation.arms.config import EvaluateConfig
from pipelines.evaluation.arms.tutoring import evaluate_tutoring
from pipelines.evaluation.arms.tutoring_systems import system_roles, waves
from pipelines.evaluation.evaluate import needed_sections, tables_markdown
from pipelines.evaluation.report.inputs import evaluate_sections
from pipelines.evaluation.report.plot_data import plot_rows
from pipelines.io import read_jsonl
from pipelines.llm.client import backend_key
from pipelines.llm.config import ScriptedBackendConfig
from pipelines.llm.scripted import ScriptedBackend
from pipelines.ram2c.config import Ram2cConfig
from pipelines.ram2c.students import make_personas, persona_by_id
from tests.evaluation.evaluate_fixtures import BASE_REPLY, ROOT, TUNED_REPLY, jsonl, write_dpo_data
from tests.ram2c.scripted import DOCS, FakeRetriever, rules

GLM_DRAFT = "GLM draft: tell me more?"
T, P, E = "T:Ms. Lin[{}]", "P:Dr. Hart[{}]", "E:Ms. Reyes[{}]"  # each group's first reviser
REPLIES = {  # what each team variant makes of the GLM draft
    "glm_r": E.format(P.format(T.format(GLM_DRAFT))),
    "glm_p_r": E.format(T.format(GLM_DRAFT)),
    "glm_e_r": P.format(T.format(GLM_DRAFT)),
    "glm_pe_r": T.format(GLM_DRAFT),
    "glm_r1": E.format(P.format(T.format(GLM_DRAFT))),  # one expert: the first reviser alone, the same text
}
SPECS = {
    name: ScriptedBackendConfig(kind="scripted", model=f"scripted-{name}", replies="unused.jsonl")
    for name in ("base", "tuned", "glm", "j1", "j2")
}
SYSTEMS = [
    {"name": "base", "kind": "base"},
    {"name": "glm", "kind": "reference", "backend": SPECS["glm"].model_dump()},
    {"name": "glm_r", "kind": "team", "draft": "glm", "backend": SPECS["glm"].model_dump()},
    {"name": "glm_p_r", "kind": "team", "draft": "glm", "skip_groups": ["P"], "backend": SPECS["glm"].model_dump()},
    {"name": "glm_e_r", "kind": "team", "draft": "glm", "skip_groups": ["E"], "backend": SPECS["glm"].model_dump()},
    {
        "name": "glm_pe_r",
        "kind": "team",
        "draft": "glm",
        "skip_groups": ["P", "E"],
        "backend": SPECS["glm"].model_dump(),
    },
    {"name": "glm_r1", "kind": "team", "draft": "glm", "one_expert": True, "backend": SPECS["glm"].model_dump()},
]
TABLES = {
    "table_1": [["tuned", "base"]],
    "table_2": [["tuned", "glm"], ["tuned", "glm_r"], ["glm", "glm_r"]],
    "table_3": [
        ["glm", "glm_r"],
        ["glm_p_r", "glm_r"],
        ["glm_e_r", "glm_r"],
        ["glm_pe_r", "glm_r"],
        ["glm_r1", "glm_r"],
    ],
}


def rank(reply: str) -> int:
    """The judges' taste: base < tuned < the GLM draft < each group a team ran on it."""
    if reply in (BASE_REPLY, TUNED_REPLY, GLM_DRAFT):
        return {BASE_REPLY: 1, TUNED_REPLY: 2, GLM_DRAFT: 3}[reply]
    return 3 + reply.count("[")


def replies(messages) -> tuple[str, str]:
    return re.search(r"Reply A:\n(.*)\n\nReply B:\n(.*)$", messages[-1]["content"], re.S).groups()


def j1(messages) -> str:
    a, b = (rank(r.strip()) for r in replies(messages))
    return "They differ.\nVerdict: " + ("A" if a > b else "B" if b > a else "equal")


def j2(messages) -> str:
    """Agrees with j1 on Tables 1 and 2; sees no difference between two team replies."""
    a, b = (r.strip() for r in replies(messages))
    if "[" in a and "[" in b:
        return "Both were rewritten by the team.\nVerdict: equal"
    return j1(messages)


def backends() -> dict:
    teacher = r"^system: You are a literature teacher"  # the drafter's prompts, recorded and new
    return {
        backend_key(SPECS["base"]): ScriptedBackend([(teacher, BASE_REPLY), *rules()]),
        backend_key(SPECS["tuned"]): ScriptedBackend([(teacher, TUNED_REPLY)]),
        backend_key(SPECS["glm"]): ScriptedBackend([(teacher, GLM_DRAFT), *rules()]),
        backend_key(SPECS["j1"]): ScriptedBackend([("Dimension to judge", j1)]),
        backend_key(SPECS["j2"]): ScriptedBackend([("Dimension to judge", j2)]),
    }


def configs(systems=SYSTEMS, tables=TABLES, **tutoring) -> tuple[Ram2cConfig, EvaluateConfig]:
    ram2c = Ram2cConfig(
        llm={"default": SPECS["base"].model_dump(), "cache": None},
        sources=[{"language": "en", "path": str(ROOT / "data/ram2c/lighthouse.en.txt")}],
        output_mode="text",
        progress=False,
    )
    judges = {"default": SPECS["j1"].model_dump(), "roles": {"judge_b": SPECS["j2"].model_dump()}, "cache": None}
    ev = validate_section(
        {
            "systems": ["tutoring"],
            "progress": False,
            "bootstrap": {"resamples": 100, "seed": 3, "min_items": 8},
            "tutoring": {
                "tuned_backend": SPECS["tuned"].model_dump(),
                "systems": systems,
                "comparisons": tables,
                "judge_llm": judges,
                "hts": {
                    "mode": "text",
                    "resamples": 100,
                    "judges": [{"name": "j1"}, {"name": "j2", "role": "judge_b"}],
                },
                **tutoring,
            },
        },
        EvaluateConfig,
        section="evaluate",
    )
    return ram2c, ev


def run(root, *, built=None, **tutoring) -> dict:
    ram2c, ev = configs(**tutoring)
    built = backends() if built is None else built
    return asyncio.run(evaluate_tutoring(ram2c, ev, root=root, backends=built, retriever=FakeRetriever(DOCS)))


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("tutoring")
    write_dpo_data(root)
    built = backends()
    return root, run(root, built=built), built


def test_every_system_answers_every_prompt_once_and_teams_rewrite_the_reference_drafts(tables):
    root, result, built = tables
    section = result["section"]
    assert section["prompts"] == {"requested": 8, "recorded": 3, "new": 5, "evaluated": 8, "without_profile": 0}
    assert section["failed_replies"] == dict.fromkeys(["tuned", "base", "glm", *REPLIES], 0)
    out = root / "data/evaluate/tutoring"
    for name, reply in {"base": BASE_REPLY, "tuned": TUNED_REPLY, "glm": GLM_DRAFT, **REPLIES}.items():
        rows = read_jsonl(out / f"replies/{name}/predictions.jsonl")
        assert len(rows) == 8 and {r["reply"] for r in rows} == {reply}, name
    glm = built[backend_key(SPECS["glm"])]
    drafts = [m for m in glm.calls if m[0]["content"].startswith("You are a literature teacher")]
    assert len(drafts) == 8  # glm answered each prompt once although 7 comparisons and 5 teams use its drafts
    traces = read_jsonl(out / "replies/glm_p_r/traces.jsonl")
    groups = {t["group"] for t in traces if t.get("step") == "synthesizer"}
    assert groups == {"T", "E"}  # without P
    one = read_jsonl(out / "replies/glm_r1/traces.jsonl")
    experts = [t for t in one if t.get("step") == "analyst_reviser" and t["sample_id"] == "ram2c-d4-t1"]
    assert len(experts) == 3  # one per group (the full team: 3 per group)
    final = [t for t in traces if t.get("step") == "team" and t["sample_id"] == "ram2c-d4-t1"]
    assert final[0]["parsed"]["draft"] == GLM_DRAFT and [g["group"] for g in final[0]["parsed"]["groups"]] == ["T", "E"]
    assert section["systems"]["glm_p_r"]["label"] == "glm-P/R" and section["systems"]["glm_r1"]["label"] == "glm-R/1"
    assert section["systems"]["glm_r"]["models"] == (
        "scripted-glm rewritten by the RAM2C T/P/E groups (3 experts each, vote) on scripted-glm"
    )


def test_positions_are_balanced_per_comparison_and_judge_and_judge_prompts_show_the_persona(tables):
    root, result, _ = tables
    out = root / "data/evaluate/tutoring/comparisons"
    prompts = {p["id"]: p for p in read_jsonl(root / "data/evaluate/tutoring/prompts.jsonl")}
    assert prompts["ram2c-d4-t1"]["persona"] == persona_by_id("s4", "en").to_vars()
    seen_orders = set()
    for key in ("tuned_vs_base", "tuned_vs_glm", "glm_p_r_vs_glm_r"):
        judgments = read_jsonl(out / key / "judgments.jsonl")
        assert len(judgments) == 8 * 3 * 2
        for judge in ("j1", "j2"):
            for dimension in ("humanized", "teaching", "safety"):
                mine = sorted(
                    (j["item_id"], j["system_position"])
                    for j in judgments
                    if j["judge"] == judge and j["dimension"] == dimension
                )
                assert [p for _, p in mine].count("A") == 4  # half the 8 items with the system first
                seen_orders.add(tuple(mine))
        traces = [t for t in read_jsonl(out / key / "traces.jsonl") if t.get("prompt")]
        assert len(traces) == 8 * 3 * 2
        for t in traces:  # criterion 1.7: the judge sees who the student is
            persona = prompts[t["sample_id"]]["persona"]
            line = f"Student: {persona['grade']}, {' and '.join(persona['traits'])}, likes {persona['interest']}, "
            assert line in t["prompt"][-1]["content"]
    assert len(seen_orders) >= 16  # each comparison, judge and dimension its own order
    shares = result["section"]["hts"]["tables"]["1"]["position_preference"]["scripted-tuned vs scripted-base"]
    assert shares["j1"]["first_share"] == 0.5 and not shares["j1"]["flagged"]  # a fair judge, balanced positions


def test_the_three_tables_cell_by_cell(tables):
    _, result, _ = tables
    section = result["section"]
    lines = tables_markdown({"tutoring": section, "deltas": result["deltas"], "deltas_provenance": "x"}).splitlines()

    def row(label, h, t=None, s=None):
        return f"| {label} | {h} | {t or h} | {s or h} |"

    win, loss = "100.0 (-) [100.0, 100.0]", "0.0 (-) [0.0, 0.0]"
    # j1 prefers the full team, j2 calls two team replies equal: 25 points of 100, kappa -1 (every item split)
    split, parity = "25.0 (-1.00) [25.0, 25.0]", "50.0 (-) [50.0, 50.0]"
    table_1 = lines.index("### Table 1 layout: fine-tuned models vs their raw models (HTS)")
    table_2 = lines.index(
        "### Table 2 layout: fine-tuned models vs reference models with and without the RAM2C team (HTS)"
    )
    table_3 = lines.index("### Table 3 layout: ablations of the RAM2C team vs the full team (HTS)")
    assert lines[table_1 + 2 : table_1 + 5] == [
        "| Criteria | H | T | S |",
        "|---|---:|---:|---:|",
        row("scripted-tuned vs scripted-base", win),
    ]
    assert lines[table_2 + 4 : table_2 + 7] == [
        row("scripted-tuned vs glm", loss),
        row("scripted-tuned vs glm-R", loss),
        row("glm vs glm-R", loss),
    ]
    assert lines[table_3 + 4 : table_3 + 9] == [
        row("glm vs glm-R", loss),
        row("glm-P/R vs glm-R", split),
        row("glm-E/R vs glm-R", split),
        row("glm-PE/R vs glm-R", split),
        row("glm-R/1 vs glm-R", parity),
    ]
    note = next(line for line in lines[table_3:] if line.startswith("*8 held-out"))
    assert "judges j1, j2: 2 distinct model(s) (scripted-j1 (scripted), scripted-j2 (scripted))" in note
    assert (
        "glm-P/R vs glm-R: scripted-glm rewritten by the RAM2C T/E groups (3 experts each, vote) on scripted-glm"
        in note
    )
    tables = section["hts"]["tables"]
    assert list(tables) == ["1", "2", "3"]
    assert tables["3"]["rows"]["glm-P/R vs glm-R"]["humanized"]["kappa"] == pytest.approx(-1.0)
    assert tables["2"]["rows"]["glm vs glm-R"] == tables["3"]["rows"]["glm vs glm-R"]  # judged once, in both
    # deltas: only the tuned model's rows, each vs parity
    assert [(r["metric"], r["tuned"], r["delta"]) for r in result["deltas"]] == [
        *((f"hts_{d}", 100.0, 50.0) for d in ("humanized", "teaching", "safety")),
        *((f"hts_{d}_vs_glm", 0.0, -50.0) for d in ("humanized", "teaching", "safety")),
        *((f"hts_{d}_vs_glm_r", 0.0, -50.0) for d in ("humanized", "teaching", "safety")),
    ]
    _, csv_rows = plot_rows(evaluate_sections({"tutoring": section}))["hts_scores.csv"]
    assert ("glm-R/1 vs glm-R", 50.0) in [
        (r["series"], r["score"]) for r in csv_rows if r["dimension"] == "teaching"
    ]


def test_fewer_items_than_the_minimum_print_n_too_small(tmp_path):
    write_dpo_data(tmp_path)
    result = run(tmp_path, tables={"table_1": [["tuned", "base"]]}, items=3, new_prompts=False)
    lines = tables_markdown({"tutoring": result["section"], "deltas": result["deltas"]}).splitlines()
    cell = "100.0 (-) n too small (n=3)"
    assert f"| scripted-tuned vs scripted-base | {cell} | {cell} | {cell} |" in lines
    assert "| tutoring | responder | hts_safety | 50.0 | 100.0 | +50.0 | n too small (n=3) | 3 |" in lines
    assert result["section"]["prompts"] == {
        "requested": 3,
        "recorded": 3,
        "new": 0,
        "evaluated": 3,
        "without_profile": 0,
    }


def test_prompts_without_a_profile_are_left_out_for_teams_and_failing_team_calls_stop_the_run(tmp_path):
    write_dpo_data(tmp_path)
    generated = tmp_path / "data/generated/ram2c/dpo.jsonl"  # d6 (never in a split) loses its student
    rows = read_jsonl(generated)
    for row in rows:
        if row["id"] == "ram2c-d6-t1":
            row["meta"].pop("student")
    jsonl(generated, rows)
    tables = {"table_3": [["glm", "glm_r"]], "table_1": []}
    result = run(tmp_path, tables=tables, items=3, new_prompts=False)
    assert result["section"]["prompts"]["without_profile"] == 1 and result["section"]["prompts"]["evaluated"] == 2
    note = result["section"]["hts"]["tables"]["3"]["provenance"]
    assert "1 recorded without a student profile left out (a team system runs)" in note
    assert "shortfall: 3 requested, 2 evaluated" in note
    built = backends()  # the reference drafts, but its team calls find no rule: every team reply fails
    built[backend_key(SPECS["glm"])] = ScriptedBackend([(r"^system: You are a literature teacher", GLM_DRAFT)])
    from pipelines.agents.harness import FailureBudgetExceeded

    with pytest.raises(FailureBudgetExceeded, match=r"tutoring glm_r: 2 of 2 samples failed .*failures.json"):
        run(tmp_path, built=built, tables=tables, items=3, new_prompts=False)
    failures = (tmp_path / "data/evaluate/tutoring/replies/glm_r/failures.json").read_text()
    assert "no rule matches" in failures


def test_persona_by_id_rebuilds_the_dialogues_student():
    personas = make_personas(5, "en", seed=4)
    assert persona_by_id("s3", "en", seed=4) == personas[3]
    assert persona_by_id("s3", "en", seed=5) != personas[3]
    assert [persona_by_id(x, "en") for x in (None, "", "x3", "s", "s-1")] == [None] * 5


def test_defaults_only_tables_that_run_and_team_systems_read_the_knowledge_base():
    cfg = validate_section({}, EvaluateConfig, section="evaluate")
    assert cfg.tutoring.compared() == ["tuned", "base"] and cfg.tutoring.comparisons.by_table() == {
        "1": [("tuned", "base")]
    }
    assert needed_sections(cfg) == ["tagging", "kgc", "ram2c"]
    _, ev = configs()
    assert ev.tutoring.compared() == ["tuned", "base", "glm", *REPLIES]
    assert needed_sections(ev) == ["ram2c", "build_kb", "retrieval"]
    _, only_3 = configs(tables={"table_1": [], "table_3": [["glm_p_r", "glm_r"]]})
    assert only_3.tutoring.compared() == ["glm", "glm_r", "glm_p_r"]  # the draft runs, tuned and base do not


GLM = {"kind": "openai", "model": "glm-4", "base_urls": ["https://open.bigmodel.cn/api/paas/v4"]}


@pytest.mark.parametrize(
    "tutoring, message",
    [
        (
            {"systems": [{"name": "glm", "kind": "frontier", "backend": GLM}]},
            r"systems\.0\.kind: Input should be 'base'",
        ),
        ({"systems": [{"name": "base", "kind": "base"}] * 2}, "system names must be distinct"),
        (
            {"systems": [{"name": "glm", "kind": "reference"}]},
            "kind reference needs a backend, e.g. backend: {kind: openai",
        ),
        ({"systems": [{"name": "r", "kind": "team"}]}, "kind team needs draft"),
        ({"systems": [{"name": "glm", "kind": "base", "backend": GLM}]}, "remove its backend, or use kind reference"),
        ({"systems": [{"name": "b", "kind": "base", "skip_groups": ["P"]}]}, "for kind team only"),
        ({"systems": [{"name": "tuned", "kind": "base"}]}, "'tuned' is the model under test"),
        ({"systems": [{"name": "a/b", "kind": "reference", "backend": GLM}]}, r"systems\.0\.name"),
        (
            {"systems": [{"name": "base", "kind": "base"}, {"name": "r", "kind": "team", "draft": "glm"}]},
            "draft 'glm' must be tuned or a base or reference system",
        ),
        (
            {
                "systems": [
                    {"name": "base", "kind": "base"},
                    {"name": "r", "kind": "team", "draft": "base", "skip_groups": ["T"]},
                ]
            },
            r"skip_groups\.0",
        ),
        ({"comparisons": {"table_2": [["tuned", "glm"]]}}, r"table_2: \['glm'\] not in evaluate.tutoring.systems"),
        ({"comparisons": {"table_1": [["base", "base"]]}}, "compares a system with itself"),
        ({"comparisons": {"table_1": [["tuned", "base"], ["tuned", "base"]]}}, "table_1 pairs must be distinct"),
        ({"comparisons": {"table_1": []}}, "every table is empty"),
        (
            {
                "systems": [{"name": n, "kind": "reference", "backend": GLM} for n in ("a_vs", "b", "a", "vs_b")],
                "comparisons": {"table_1": [["tuned", "b"]], "table_2": [["a_vs", "b"]], "table_3": [["a", "vs_b"]]},
            },
            r"comparisons \['a_vs', 'b'\] and \['a', 'vs_b'\] would share the folder 'a_vs_vs_b'",
        ),
        ({"comparisons": {"table_4": []}}, "table_4: unknown key"),
        (
            {"systems": [{"name": "hts_judge", "kind": "base"}], "comparisons": {"table_1": [["tuned", "hts_judge"]]}},
            "also judge roles",
        ),
        ({"human": {"raters": ["Ann", "Ann"]}}, "human.raters must be distinct"),
        ({"max_failed_share": 1.5}, "max_failed_share"),
    ],
)
def test_bad_systems_and_comparisons_are_config_errors_saying_the_fix(tutoring, message):
    with pytest.raises(ConfigError, match=message):
        validate_section({"tutoring": tutoring}, EvaluateConfig, section="evaluate")


def test_team_roles_keep_the_ram2c_sampling_unless_the_backend_sets_its_own():
    ram2c = Ram2cConfig(
        llm={
            "default": SPECS["base"].model_dump(),
            "roles": {"drafter": {"sampling": {"temperature": 0.7}}, "expert": {"sampling": {"max_tokens": 99}}},
        }
    )
    glm = {**GLM, "api_key_env": "ZHIPUAI_API_KEY"}
    systems = [
        {"name": "glm", "kind": "reference", "backend": glm},
        {"name": "glm_r", "kind": "team", "draft": "glm", "backend": {**glm, "sampling": {"temperature": 0.2}}},
        {"name": "own_r", "kind": "team", "draft": "glm"},  # the ram2c section's own team roles
    ]
    _, ev = configs(systems=systems, tables={"table_2": [["glm", "glm_r"], ["glm", "own_r"]], "table_1": []})
    roles = system_roles(ram2c, ev.tutoring, drafter="drafter", base_spec=None)
    assert roles["system:glm"].sampling.temperature == 0.7 and roles["system:glm"].api_key_env == "ZHIPUAI_API_KEY"
    team = {f"system:glm_r/{r}" for r in ("expert", "synthesizer", "query_rewriter")}
    assert team <= set(roles) and all(roles[r].model == "glm-4" and roles[r].sampling.temperature == 0.2 for r in team)
    assert (
        roles["system:own_r/expert"].model == "scripted-base" and roles["system:own_r/expert"].sampling.max_tokens == 99
    )
    assert "system:glm/expert" not in roles  # a plain reference runs no team


def test_the_docs_example_is_valid_params():
    import yaml

    docs = (ROOT / "docs" / "evaluation.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", docs, re.S) if "kind: team" in b]
    cfg = validate_section(yaml.safe_load(block)["evaluate"], EvaluateConfig, section="evaluate")
    assert [(s.name, s.kind) for s in cfg.tutoring.systems] == [
        ("base", "base"),
        ("glm", "reference"),
        ("glm_r", "team"),
        ("glm_p_r", "team"),
    ]
    assert {s.backend.api_key_env for s in cfg.tutoring.systems[1:]} == {"ZHIPUAI_API_KEY"}
    assert needed_sections(cfg) == ["tagging", "kgc", "ram2c", "build_kb", "retrieval"]
    assert list(cfg.tutoring.comparisons.by_table()) == ["1", "2", "3"]


def test_drafters_run_together_then_the_teams_on_their_drafts():
    cfg = configs()[1].tutoring
    teams = ["glm_r", "glm_p_r", "glm_e_r", "glm_pe_r", "glm_r1"]
    assert waves(cfg.compared(), cfg) == [["tuned", "base", "glm"], teams]
    assert waves(["tuned", "base"], cfg) == [["tuned", "base"]]
    with pytest.raises(StageError, match=r"\['glm_r'\]: a team's draft system does not run before it"):
        waves(["tuned", "glm_r"], cfg)
