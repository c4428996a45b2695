"""The static trace browser on the traces and predictions a real smoke run of each team wrote
(tests/evaluation/recorded): outcomes, each team's view (tagging's label and verdicts, KGC's gold
and rounds, RAM2C's final pair, group replies and every expert's vote), seeded stratified
sampling, and the page driven in a headless browser (team and outcome filters, every sample's
view, deep links)."""

import json
from collections import Counter

from pipelines.evaluation.traces.browser import choose_samples, group_samples, render_browser, write_trace_browser
from pipelines.evaluation.traces.story import sample_outcome, story_html
from pipelines.evaluation.traces.views import change_html, ram2c_html, rounds_html, tagging_html
from tests.evaluation.recorded import RECORDED, TEAMS, jsonl, records, traces

VIEWS = {  # what the top of each team's story must show
    "tagging": ["Label and verdicts"],
    "kgc": ["Sentence and gold", "Gold items", "Rounds per expert"],
    "ram2c": ["final pair", "reply after each group", "documents and votes"],
    "ram2c_topics": ["Steps in order"],
}


def _pairs() -> dict[tuple[str, int], dict[str, str]]:
    """The exported pairs (the shared DPO rows) by (dialogue, turn): ``{"chosen", "rejected"}`` texts."""
    rows = jsonl(RECORDED / "data/generated/ram2c/dpo.jsonl")
    return {(r["meta"]["dialogue"], r["meta"]["turn"]): {k: r[k][-1]["content"] for k in ("chosen", "rejected")}
            for r in rows}  # fmt: skip


def test_outcomes_of_the_recorded_runs():
    tagging = group_samples(traces("tagging"))
    for sample_id, rows in tagging.items():
        aggregate = next(r for r in rows if r.get("role") == "aggregate")
        assert sample_outcome(rows) == aggregate["outcome"], sample_id
        record = records("tagging")[sample_id]
        if record["split"] == "evaluation":  # the predictions file agrees
            expected = "correct" if record["predictions"]["team"] == record["label"] else "wrong"
            assert aggregate["outcome"] == expected, sample_id
    for sample_id, rows in group_samples(traces("kgc")).items():
        assert sample_outcome(rows) == next(r["outcome"] for r in rows if r.get("role") == "final"), sample_id
    kept = {dialogue for dialogue, _ in _pairs()}
    ram2c = {s: sample_outcome(rows) for s, rows in group_samples(traces("ram2c")).items()}
    assert ram2c == {s: "kept" if s in kept else "dropped" for s in ram2c}
    assert "kept" in ram2c.values()  # the recorded run exported pairs (and dropped a dialogue only if it did)


def test_seeded_stratified_sample():
    outcomes = {f"s{i}": ("failed" if i == 7 else "correct" if i % 3 else "wrong") for i in range(300)}
    chosen = choose_samples(outcomes, limit=30, seed=1)
    assert len(chosen) == 30 and chosen == choose_samples(outcomes, limit=30, seed=1)
    assert chosen != choose_samples(outcomes, limit=30, seed=2)
    assert "s7" in chosen  # the single failure stays visible
    assert chosen == sorted(chosen, key=lambda s: int(s[1:]))  # original order
    assert sum(outcomes[s] == "wrong" for s in chosen) in (9, 10)
    assert choose_samples(outcomes, limit=None) == list(outcomes)


def test_tagging_label_and_verdicts_first():
    for sample_id, rows in group_samples(traces("tagging")).items():
        record = records("tagging")[sample_id]
        view = tagging_html(rows, record)
        assert f"<b>Label</b>: {'yes' if record['label'] else 'no'}" in view
        team = next(r for r in rows if r.get("role") == "aggregate")
        assert f"<td>team</td><td>{'yes' if team['parsed']['verdict'] else 'no'}</td>" in view
        story = story_html(rows, record)
        assert story.index("Label and verdicts") < story.index("Steps in order") < story.index("<h4>Program</h4>")


def test_kgc_gold_and_rounds():
    for sample_id, rows in group_samples(traces("kgc")).items():
        record = records("kgc")[sample_id]
        story = story_html(rows, record)
        gold = json.dumps(record["gold"][0], ensure_ascii=False).replace('"', "&quot;")
        assert f"Gold items ({len(record['gold'])})" in story and gold in story
        assert story.index("Sentence and gold") < story.index("Rounds per expert") < story.index("Steps in order")
        rounds = rounds_html(rows)
        experts = list(dict.fromkeys(r["expert"] for r in rows if "round" in r))
        assert rounds.count("<tr><th>round") == len({r["round"] for r in rows if "round" in r}) == 2
        assert "".join(f"<th>{e}</th>" for e in experts) in rounds
    assert change_html("a\nb", "a\nc") == '<div class="del">-b</div><div class="add">+c</div>'
    added = change_html([["PER", "x"]], [["PER", "x"], ["LOC", "y"]])
    assert added == '<div class="add">+ [&quot;LOC&quot;, &quot;y&quot;]</div>'


def test_ram2c_final_pair_group_replies_and_votes():
    pairs = _pairs()
    for sample_id, rows in group_samples(traces("ram2c")).items():
        view = ram2c_html(rows, records("ram2c")[sample_id])
        pair = pairs.get((sample_id, 1))
        if pair is not None:  # the pair the team exported is the view's final pair
            assert '<span class="badge kept">kept</span>' in view
            chosen, rejected = view.index("<h4>chosen"), view.index("<h4>rejected")
            assert view.find(_html(pair["chosen"]), chosen) > chosen
            assert view.find(_html(pair["rejected"]), rejected) > rejected
        else:
            assert '<span class="badge dropped">dropped: ' in view
        assert view.index("final pair") < view.index("reply after each group") < view.index("documents and votes")
        reflections = [r for r in rows if r["agent"] == "reflection"]
        for reflection in reflections:  # every expert's vote, from the reflection rows, not "-"
            for document in reflection["parsed"]["documents"]:
                votes = ", ".join(f"{e}: {'yes' if v else 'no'}" for e, v in document["votes"].items())
                assert f"<td>{votes}</td><td>{'accepted' if document['accepted'] else 'rejected'}</td>" in view
        assert [f"after {g}" in view for g in ("T", "P", "E")] == [True] * 3


def _html(text: str) -> str:
    import html

    return html.escape(text)


def test_page_is_self_contained_and_reads_jsonl_tolerantly(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_text((RECORDED / "data/generated/kgc/traces.jsonl").read_text(encoding="utf-8") + "{broken\n[1]\n",
                    encoding="utf-8")  # fmt: skip
    stats = write_trace_browser(tmp_path / "traces.html", {"kgc": path, "ram2c": traces("ram2c")})
    assert stats["kgc"]["bad_lines"] == 2 and stats["kgc"]["samples"] == len(group_samples(traces("kgc")))
    page = (tmp_path / "traces.html").read_text(encoding="utf-8")
    assert "<script src" not in page and "http" not in page.replace("http-equiv", "")
    assert "kgc: 2 unreadable trace lines skipped." in page
    many = [{**row, "sample_id": f"{row['sample_id']}-{i}"} for i in range(60) for row in traces("kgc")]
    _, big = render_browser({"kgc": many}, limit=50, seed=3)
    assert big["kgc"]["shown"] == 50 and big["kgc"]["samples"] == 120 and big["kgc"]["sampled"]


def test_every_view_in_a_headless_browser(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver, _ = browser
    page = tmp_path / "traces.html"
    write_trace_browser(page, {team: traces(team) for team in TEAMS}, records={team: records(team) for team in TEAMS})
    driver.get(page.as_uri())

    def visible(selector: str = "#list li"):
        return [e for e in driver.find_elements(By.CSS_SELECTOR, selector) if e.is_displayed()]

    for team in TEAMS:
        Select(driver.find_element(By.ID, "team")).select_by_value(team)
        driver.find_element(By.CSS_SELECTOR, 'input[name=outcome][value="all"]').click()
        samples = group_samples(traces(team))
        items = visible()
        assert [li.get_attribute("data-sample") for li in items] == list(samples), team
        outcomes = {sample_outcome(rows) for rows in samples.values()}
        radios = [r.get_attribute("value") for r in visible("input[name=outcome]")]
        assert radios == ["all", *[o for o in ("correct", "wrong", "kept", "dropped", "failed", "unscored")
                                   if o in outcomes]], team  # fmt: skip
        for li in items:
            li.click()
            article = driver.find_element(By.ID, li.get_attribute("data-target"))
            assert article.is_displayed()
            assert li.get_attribute("data-sample") in article.find_element(By.TAG_NAME, "h2").text
            for heading in VIEWS[team]:
                assert heading.lower() in article.text.lower(), (team, heading)
            address = driver.execute_script("return decodeURIComponent(location.hash)")
            assert address == f"#{team}/{li.get_attribute('data-sample')}"

    Select(driver.find_element(By.ID, "team")).select_by_value("ram2c")
    outcomes = Counter(sample_outcome(rows) for rows in group_samples(traces("ram2c")).values())
    for outcome, count in outcomes.items():  # each filter shows exactly the dialogues of its outcome
        driver.find_element(By.CSS_SELECTOR, f'input[name=outcome][value="{outcome}"]').click()
        assert len(visible()) == count and driver.find_element(By.ID, "shown").text == f"{count} shown"

    driver.get(page.as_uri() + "#kgc/" + next(iter(group_samples(traces("kgc")))))  # a deep link from elsewhere
    driver.refresh()
    target = visible("#list li.active")[0].get_attribute("data-target")
    assert driver.find_element(By.ID, "team").get_attribute("value") == "kgc"
    assert driver.find_element(By.ID, target).is_displayed() and not driver.find_element(By.ID, "hint").is_displayed()


def test_tagging_question_definition_and_split_and_the_ram2c_persona():
    """The tagging view names the pair (question, definition: the report adds them from the tagging
    data) and whether it was evaluated or generated; the RAM2C view names the student's persona."""
    from pathlib import Path

    from pipelines.evaluation.report.build import tagging_texts
    from pipelines.ram2c.students import persona_by_id

    project = Path(__file__).resolve().parents[3]
    texts = tagging_texts({"tagging": {"data": {"path": "data/tagging/demo.jsonl"}}}, project)
    splits = set()
    for sample_id, rows in group_samples(traces("tagging")).items():
        record = {**texts[sample_id], **records("tagging")[sample_id]}
        view = tagging_html(rows, record)
        assert f"<b>Question</b>: {_html(texts[sample_id]['question'])}</p>" in view
        assert f"<b>Definition</b>: {_html(texts[sample_id]['definition'])}</p>" in view
        splits.add(record["split"])
        assert {"evaluation": "evaluated (evaluation split: scored)",
                "generation": "generated (generation split"}[record["split"]] in view  # fmt: skip
    assert splits == {"evaluation", "generation"}  # the recorded run has both
    for sample_id, rows in group_samples(traces("ram2c")).items():
        record = records("ram2c")[sample_id]
        persona = persona_by_id(record["student"], "en", seed=0)
        line = f"{persona.grade}, {persona.traits[0]} and {persona.traits[1]}, likes {persona.interest}"
        assert f"<b>Student persona</b> {record['student']}: {line}, {persona.reading_level}</p>" in ram2c_html(
            rows, record
        )
