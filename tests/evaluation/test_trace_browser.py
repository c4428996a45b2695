"""The static trace browser: outcomes, seeded stratified sampling, each team's views, and the page
driven in a headless browser (filter, open a sample)."""

import json

from pipelines.evaluation.traces.browser import choose_samples, group_samples, render_browser, write_trace_browser
from pipelines.evaluation.traces.story import change_html, rounds_html, sample_outcome, story_html
from tests.evaluation.trace_fixtures import kgc_rows, ram2c_rows, tagging_rows


def test_outcomes_from_the_evidence_in_the_rows():
    samples = group_samples(tagging_rows())
    assert {s: sample_outcome(r) for s, r in samples.items()} == {
        "q-correct": "correct",
        "q-wrong": "wrong",
        "q-failed": "failed",
    }
    kgc = group_samples(kgc_rows())
    assert sample_outcome(kgc["sent-1"]) == "wrong" and sample_outcome(kgc["sent-2"]) == "correct"
    assert sample_outcome(ram2c_rows()) == "unscored"
    assert sample_outcome([{"ok": False}, {"outcome": "correct"}]) == "correct"


def test_seeded_stratified_sample():
    outcomes = {f"s{i}": ("failed" if i == 7 else "correct" if i % 3 else "wrong") for i in range(300)}
    chosen = choose_samples(outcomes, limit=30, seed=1)
    assert len(chosen) == 30 and chosen == choose_samples(outcomes, limit=30, seed=1)
    assert chosen != choose_samples(outcomes, limit=30, seed=2)
    assert "s7" in chosen  # the single failure stays visible
    assert chosen == sorted(chosen, key=lambda s: int(s[1:]))  # original order
    assert sum(outcomes[s] == "wrong" for s in chosen) in (9, 10)
    assert choose_samples(outcomes, limit=None) == list(outcomes)


def test_kgc_rounds_side_by_side_with_changes():
    page = rounds_html(kgc_rows())
    assert page.count("<tr><th>round") == 3 and "<th>ner</th><th>re</th>" in page
    assert "+(&#x27;DATE&#x27;, &#x27;1987&#x27;)" in page  # NER added an entity in round 1
    assert "-(&#x27;Messi&#x27;, &#x27;born_in&#x27;, &#x27;Rosario&#x27;)" in page  # RE replaced a triple in round 2
    assert "no change" in page
    assert change_html("a\nb", "a\nc") == '<div class="del">-b</div><div class="add">+c</div>'
    added = change_html([["PER", "x"]], [["PER", "x"], ["LOC", "y"]])
    assert added == '<div class="add">+ [&quot;LOC&quot;, &quot;y&quot;]</div>'
    without_kept = [{k: v for k, v in r.items() if k != "kept"} for r in kgc_rows()]
    assert "+ [&quot;DATE&quot;, &quot;1987&quot;]" in rounds_html(without_kept)  # parsed.items then


def test_ram2c_and_tagging_stories():
    story = story_html(ram2c_rows())
    assert "<td>doc-15</td><td>theory</td><td>0.52</td><td>T1: 5, T2: 4</td>" in story
    assert "Heuristic questions &lt;invite&gt; analysis." in story  # escaped
    assert story.index("after T") < story.index("after P") and "<h3>Final pair</h3>" in story
    tagging = story_html(group_samples(tagging_rows())["q-correct"])
    assert "<h4>Program</h4>" in tagging and "x = 5\nprint(x &gt; 3)" in tagging
    assert "Sandbox (exit_code=0, timed_out=False, killed_reason=None, verdict=True)" in tagging
    assert "You are the planner." in tagging and "prompt_tokens 12" in tagging
    failed = story_html(group_samples(tagging_rows())["q-failed"])
    assert "parse (attempt 2/2): no answer" in failed and "all 2 replies" in failed


def test_page_is_self_contained_and_reads_jsonl_tolerantly(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in tagging_rows()) + "\n{broken\n[1]\n", encoding="utf-8")
    stats = write_trace_browser(tmp_path / "traces.html", {"tagging": path, "kgc": kgc_rows()})
    assert stats["tagging"]["bad_lines"] == 2 and stats["tagging"]["samples"] == 3
    page = (tmp_path / "traces.html").read_text(encoding="utf-8")
    assert "<script src" not in page and "http" not in page.replace("http-equiv", "")
    assert "tagging: 2 unreadable trace lines skipped." in page
    _, big = render_browser({"tagging": tagging_rows(n_extra=300)}, limit=50, seed=3)
    assert big["tagging"]["shown"] == 50 and big["tagging"]["samples"] == 303 and big["tagging"]["sampled"]


def test_trace_browser_in_a_headless_browser(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver, _ = browser
    page = tmp_path / "traces.html"
    write_trace_browser(page, {"tagging": tagging_rows(), "kgc": kgc_rows(), "ram2c": ram2c_rows()})
    driver.get(page.as_uri())

    def visible_items():
        return [li.get_attribute("data-target") for li in driver.find_elements(By.CSS_SELECTOR, "#list li")
                if li.is_displayed()]  # fmt: skip

    assert len(visible_items()) == 3  # tagging first, all outcomes
    driver.find_element(By.CSS_SELECTOR, 'input[name=outcome][value="wrong"]').click()
    wrong = visible_items()
    assert len(wrong) == 1 and driver.find_element(By.ID, "shown").text == "1 shown"
    driver.find_element(By.CSS_SELECTOR, f'li[data-target="{wrong[0]}"]').click()
    article = driver.find_element(By.ID, wrong[0])
    assert article.is_displayed() and "q-wrong" in article.find_element(By.TAG_NAME, "h2").text
    assert not driver.find_element(By.ID, "hint").is_displayed()
    assert "Program" in article.text and "True" in article.text
    driver.find_element(By.CSS_SELECTOR, 'input[name=outcome][value="failed"]').click()
    texts = [driver.find_element(By.CSS_SELECTOR, f'li[data-target="{t}"]').text for t in visible_items()]
    assert len(texts) == 1 and texts[0].startswith("q-failed") and "1 steps" in texts[0]

    Select(driver.find_element(By.ID, "team")).select_by_value("kgc")
    driver.find_element(By.CSS_SELECTOR, 'input[name=outcome][value="all"]').click()
    items = visible_items()
    assert len(items) == 2
    driver.find_element(By.CSS_SELECTOR, f'li[data-target="{items[0]}"]').click()
    article = driver.find_element(By.ID, items[0])
    assert not driver.find_element(By.ID, wrong[0]).is_displayed()
    rounds = article.find_element(By.CSS_SELECTOR, "table.rounds")
    assert len(rounds.find_elements(By.TAG_NAME, "tr")) == 4 and "+('DATE', '1987')" in rounds.text

    Select(driver.find_element(By.ID, "team")).select_by_value("ram2c")
    items = visible_items()
    driver.find_element(By.CSS_SELECTOR, f'li[data-target="{items[0]}"]').click()
    article = driver.find_element(By.ID, items[0])
    assert "Final pair" in article.text and "T1: 5, T2: 4" in article.find_element(By.CSS_SELECTOR, "table.hits").text
