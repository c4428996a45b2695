"""Human rating: blind sheets and key (positions balanced per rater), import into the same scoring and
kappa, and the HTML form driven in a real headless browser (choose answers, reload, save the CSV
download, import it)."""

import csv

import pytest

from pipelines.evaluation.hts.judging import DIMENSIONS, HTSItem
from pipelines.evaluation.hts.scoring import hts_scores
from pipelines.evaluation.human.form import render_form, write_form, write_rating_pack
from pipelines.evaluation.human.sheets import SHEET_COLUMNS, TIE_NOTE, read_csv, read_ratings, write_sheets
from tests.evaluation.browser import wait_for_file

STUDENT = {"grade": "grade 5", "traits": ["shy", "playful"], "interest": "animals",
           "reading_level": "reads at grade level"}  # fmt: skip
ITEMS = [
    HTSItem(f"item{i}", f"Topic {i} <b>", f'Answer "{i}", with a comma', f"TUNED {i}\nline two", f"BASE {i}",
            student=STUDENT)
    for i in range(6)
]  # fmt: skip


def fill(path, choose):
    """Fill a sheet as a rater would in a spreadsheet: ``choose(row) -> choice``."""
    rows = read_csv(path)
    for row in rows:
        row["choice"] = choose(row)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def picks_tuned(row):
    return "A" if row["reply_a"].startswith("TUNED") else "B"


def test_sheets_are_blind_complete_and_seeded(tmp_path):
    sheets = write_sheets(tmp_path, ITEMS, ["Ann Lee", "Bo"], seed=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key.csv", "sheet_Ann_Lee.csv", "sheet_Bo.csv"]
    rows = read_csv(tmp_path / "sheet_Ann_Lee.csv")
    assert list(rows[0]) == list(SHEET_COLUMNS) and len(rows) == 6 * 3
    assert [r["row"] for r in rows] == [str(i) for i in range(1, 19)]
    assert all(r["choice"] == "" and r["rater"] == "Ann Lee" for r in rows)
    text = (tmp_path / "sheet_Ann_Lee.csv").read_text(encoding="utf-8-sig")
    assert not any(i.id in text for i in ITEMS) and "position" not in text  # ids and positions hidden
    assert {r["student"] for r in rows} == {"grade 5, shy and playful, likes animals, reads at grade level"}
    key = {(r["rater"], r["item_key"], r["dimension"]): r for r in read_csv(tmp_path / "key.csv")}
    assert len(key) == 2 * 6 * 3
    for rater in ("Ann Lee", "Bo"):
        for dimension in DIMENSIONS:
            entries = [e for (who, _, d), e in key.items() if who == rater and d == dimension]
            assert sorted(e["system_position"] for e in entries) == ["A"] * 3 + ["B"] * 3  # balanced per rater
    for row in rows:
        entry = key[("Ann Lee", row["item_key"], row["dimension"])]
        system_reply = row["reply_a"] if entry["system_position"] == "A" else row["reply_b"]
        assert system_reply.startswith("TUNED")
    orders = {who: [key[(who, r["item_key"], r["dimension"])]["system_position"] for r in read_csv(
        tmp_path / f"sheet_{who.replace(' ', '_')}.csv") if r["dimension"] == "humanized"] for who in ("Ann Lee", "Bo")}
    by_item = {who: {key[(who, r["item_key"], "humanized")]["item_id"]: key[(who, r["item_key"], "humanized")][
        "system_position"] for r in read_csv(tmp_path / f"sheet_{who.replace(' ', '_')}.csv")
        if r["dimension"] == "humanized"} for who in ("Ann Lee", "Bo")}  # fmt: skip
    assert orders["Ann Lee"] and by_item["Ann Lee"] != by_item["Bo"]  # each rater their own positions
    # seeded: the same call gives the same sheets; raters see different orders
    assert write_sheets(tmp_path / "again", ITEMS, ["Ann Lee", "Bo"], seed=4) == sheets
    assert [r["item_key"] for r in sheets["Ann Lee"]] != [r["item_key"] for r in sheets["Bo"]]
    sampled = write_sheets(tmp_path / "sample", ITEMS, ["Ann Lee"], seed=4, sample=2)["Ann Lee"]
    assert len(sampled) == 6 and len({r["item_key"] for r in sampled if r["dimension"] == "safety"}) == 2
    with pytest.raises(ValueError, match="distinct"):
        write_sheets(tmp_path, ITEMS, ["a b", "a_b"])


def test_filled_sheets_import_into_scores_and_kappa(tmp_path):
    write_sheets(tmp_path, ITEMS, ["Ann", "Bo", "Cy"], seed=1)
    fill(tmp_path / "sheet_Ann.csv", picks_tuned)
    fill(tmp_path / "sheet_Bo.csv", picks_tuned)
    fill(tmp_path / "sheet_Cy.csv", lambda row: "equal" if row["dimension"] == "safety" else picks_tuned(row))
    paths = sorted(tmp_path.glob("sheet_*.csv"))
    by_comparison, problems = read_ratings(paths, tmp_path / "key.csv")
    assert problems == [] and list(by_comparison) == [""] and len(judgments := by_comparison[""]) == 3 * 18
    scores = hts_scores(judgments, resamples=100)
    assert scores["humanized"]["score"] == 100.0 and scores["teaching"]["score"] == 100.0
    assert scores["safety"]["score"] == pytest.approx(100 * (2 * 6 * 4 + 6 * 2) / (18 * 4))
    assert scores["humanized"]["kappa"] is None  # all in one category: undefined
    assert scores["safety"]["raters"] == 3 and scores["safety"]["kappa"] == pytest.approx(-0.5)


def test_import_counts_bad_rows(tmp_path):
    write_sheets(tmp_path, ITEMS[:2], ["Ann"], seed=0)
    path = tmp_path / "sheet_Ann.csv"
    rows = read_csv(path)
    rows[0]["choice"], rows[1]["choice"], rows[2]["choice"] = "b", "maybe", ""
    rows[3]["item_key"] = "kforged"
    rows.append(dict(rows[0]))  # a duplicate
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    judged, problems = read_ratings([path], tmp_path / "key.csv")
    judgments = judged[""]
    assert len(judgments) == 5 and judgments[0].choice == "B" and judgments[0].ok
    assert [j.error for j in judgments[1:3]] == ["verdict 'maybe' is not A, B or equal", "not rated"]
    assert problems == [f"sheet_Ann.csv:5: the key has no item 'kforged' / {rows[3]['dimension']!r} for rater 'Ann'",
                        f"sheet_Ann.csv:8: Ann rated {rows[0]['item_key']} / {rows[0]['dimension']} twice"]
    (tmp_path / "bad.csv").write_text("who,what\nx,y\n", encoding="utf-8")
    with pytest.raises(ValueError, match="needs columns"):
        read_ratings([tmp_path / "bad.csv"], tmp_path / "key.csv")


def test_rating_pack(tmp_path):
    paths = write_rating_pack(tmp_path, ITEMS, ["Ann", "Bo"], dimensions=["safety"], seed=3, language="zh")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["form.html", "key.csv", "sheet_Ann.csv", "sheet_Bo.csv"]
    assert paths["form"].read_text(encoding="utf-8").count('class="item"') == 2 * 6
    assert len(read_csv(paths["sheets"][1])) == 6 and len(read_csv(paths["key"])) == 2 * 6  # per rater


def test_form_is_self_contained_and_escaped(tmp_path):
    sheets = write_sheets(tmp_path, ITEMS[:2], ["Ann"], seed=0)
    page = render_form(sheets, language="zh")
    assert "<script src" not in page and "http://" not in page and "https://" not in page
    assert "Topic 0 &lt;b&gt;" in page and "<b>Topic" not in page
    assert "1.1 以学生的口吻作答" in page and "A 更好" in page
    with pytest.raises(ValueError, match="language"):
        render_form(sheets, language="fr")


def test_form_in_a_headless_browser(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver, downloads = browser
    sheets = write_sheets(tmp_path, ITEMS[:4], ["Ann", "Bo Li"], seed=2)
    form = tmp_path / "form.html"
    write_form(form, sheets, title="Rating test")
    driver.get(form.as_uri())
    assert driver.title == "Rating test"
    Select(driver.find_element(By.ID, "rater")).select_by_value("Bo Li")
    section = driver.find_element(By.CSS_SELECTOR, 'section[data-slug="Bo_Li"]')
    assert section.is_displayed()
    assert not driver.find_element(By.CSS_SELECTOR, 'section[data-slug="Ann"]').is_displayed()
    items = section.find_elements(By.CSS_SELECTOR, ".item")
    assert len(items) == 12
    expected = {}
    for index, item in enumerate(items[:-1]):  # the last row stays unanswered
        reply_a = item.find_elements(By.CSS_SELECTOR, ".reply")[0].text
        choice = "equal" if index % 4 == 0 else ("A" if reply_a.startswith("TUNED") else "B")
        item.find_element(By.CSS_SELECTOR, f'input[value="{choice}"]').click()
        expected[(item.get_attribute("data-key"), item.get_attribute("data-dimension"))] = choice
    items[1].find_element(By.TAG_NAME, "textarea").send_keys('too "formal", a bit long')
    assert driver.find_element(By.ID, "status").text.startswith("11 / 12")
    driver.refresh()  # answers survive a reload (browser storage)
    Select(driver.find_element(By.ID, "rater")).select_by_value("Bo Li")
    assert driver.find_element(By.ID, "status").text.startswith("11 / 12")
    section = driver.find_element(By.CSS_SELECTOR, 'section[data-slug="Bo_Li"]')
    items = section.find_elements(By.CSS_SELECTOR, ".item")
    assert items[1].find_element(By.TAG_NAME, "textarea").get_attribute("value") == 'too "formal", a bit long'
    driver.find_element(By.ID, "save").click()
    saved = wait_for_file(downloads, "ratings_Bo_Li*.csv")

    rows = read_csv(saved)
    assert len(rows) == 12 and {r["rater"] for r in rows} == {"Bo Li"}
    assert {(r["item_key"], r["dimension"]): r["choice"] for r in rows if r["choice"]} == expected
    assert rows[1]["comment"] == 'too "formal", a bit long'
    judged, problems = read_ratings([saved], tmp_path / "key.csv")
    assert problems == [] and len(judgments := judged[""]) == 12
    assert sum(j.outcome is None for j in judgments) == 1
    scored = [j for j in judgments if j.outcome]
    assert {j.outcome for j in scored} == {"better", "equal"}
    scores = hts_scores(judgments, resamples=50)
    assert sum(s["n"] for s in scores.values()) == 11 and sum(s["failed"] for s in scores.values()) == 1


def test_no_browser_means_a_skip_that_says_why(monkeypatch, tmp_path):
    from tests.evaluation import browser as helper

    monkeypatch.setattr(helper, "_which", lambda names: None)
    monkeypatch.setattr(helper, "_install_chromium", lambda: "apt-get is not available")
    with pytest.raises(pytest.skip.Exception, match="none could be installed: apt-get is not available"):
        helper.start_browser(tmp_path)


def test_ties_are_marked_and_filled_equal(tmp_path, browser):
    """Two replies that are the same text (punctuation and case aside) are not put to a rater: the
    sheet says so and holds "equal", the form shows the note with Equal chosen, and the import scores
    it as equal."""
    from selenium.webdriver.common.by import By

    items = [ITEMS[0], HTSItem("same", "Topic", "Answer", "The same reply.", "the same reply", student=STUDENT)]
    sheets = write_sheets(tmp_path, items, ["Ann"], dimensions=["teaching"], seed=0)
    rows = {r["reply_a"].casefold().strip("."): r for r in sheets["Ann"]}
    tie, other = rows["the same reply"], rows[next(k for k in rows if k != "the same reply")]
    assert (tie["tie"], tie["choice"]) == (TIE_NOTE, "equal") and (other["tie"], other["choice"]) == ("", "")
    assert [r["tie"] for r in read_csv(tmp_path / "sheet_Ann.csv")].count(TIE_NOTE) == 1
    judged, _ = read_ratings([tmp_path / "sheet_Ann.csv"], tmp_path / "key.csv")
    assert [j.outcome for j in judged[""] if j.item_id == "same"] == ["equal"]

    driver, _ = browser
    write_form(tmp_path / "form.html", sheets, title="Ties")
    driver.get((tmp_path / "form.html").as_uri())
    marked = driver.find_element(By.CSS_SELECTOR, ".item.tie")
    assert "same text: marked Equal" in marked.text
    assert marked.find_element(By.CSS_SELECTOR, 'input[value="equal"]').is_selected()
    assert driver.find_element(By.ID, "status").text.startswith("1 / 2")


def test_the_passage_is_shown_for_the_factual_errors_criterion(tmp_path):
    """Criterion 2.10 (factual errors, the teaching dimension) needs the book passage: its rows carry
    it, the other dimensions' rows do not, and the form shows it above the replies."""
    passages = {"item0": "Crusoe saved a dog and two cats from the wreck."}
    sheets = write_sheets(tmp_path, ITEMS[:2], ["Ann"], seed=0, passages=passages)
    rows = read_csv(tmp_path / "sheet_Ann.csv")
    shown = {(r["dimension"], r["passage"]) for r in rows if r["passage"]}
    assert shown == {("teaching", passages["item0"])}
    assert sum(r["dimension"] == "teaching" and not r["passage"] for r in rows) == 1  # item1: none recorded
    page = render_form(sheets)
    assert page.count("Book passage (check the replies against it for factual errors)") == 1
    assert page.index("Book passage") < page.index(passages["item0"]) < page.index('<div class="replies">', page.index(
        "Book passage"))  # fmt: skip
