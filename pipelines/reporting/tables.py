"""Report tables laid out like the papers', built from plain metrics dicts.

Every builder takes one section of the metrics (below) and returns a :class:`Table` whose
``note`` says what data and models produced it; rates in [0, 1] are shown as percentages with
one decimal (the papers' style), HTS scores as they are (0-100, 50 = parity).

- ``tagging``: ``{"models": {size: {"model", "systems": {method: {"overall": {"accuracy",
  "precision", "recall", "f1", "coverage"}, "backbone", ...}}}}, "provenance": ...,
  "failure_outcome"}`` (the tagging paper's Table 4: metric x model-size rows naming the model,
  method columns; the best method of a row in bold; coverage and cost rows; the failure policy in
  the note). A generate-stage ``metrics.json`` with a top-level ``systems`` is read as its section.
- ``deltas``: ``[{"team", "system", "metric", "base", "tuned", "delta", "ci": [lo, hi], "n"}]``
  (:func:`pipelines.stats.bootstrap.paired_delta` rows, tuned vs base).
- ``kgc``: ``{"datasets": [{"name", "task"}], "rows": {method: {dataset: f1}}, "reference":
  {method: reference_method}, "ee": {method: {dataset: {"trigger", "argument"}}}, "rounds":
  {series: [f1 at round 0, 1, ...]}, "provenance": ...}`` (CooperKGC's Table 2 with ``(+gain)``
  over the reference, AutoKG; EE trigger and argument F1; its rounds figure as a table).
- ``hts``: ``{"tables": {"1" | "2" | "3": {"rows": {label: {dimension: {"score", "kappa",
  "ci", "ci_note", "items"}}}, "position_preference": {label: {judge: {"A", "B", "equal",
  "flagged"}}}, "provenance": ...}}}`` (RAM2C's Tables 1-3: ``score (kappa)`` per H/T/S, with the
  bootstrap interval or "n too small"; then each table's judges' first-position shares).

- ``ram2c``: a ``generate_ram2c`` ``metrics.json`` (+ ``provenance``): what the team kept, and
  group reflection per expert group.
- ``base_tuned``: ``{team: {"base": {metric: value}, "tuned": {...}, "n", "provenance"}}``
  (``reports/evaluate/metrics.json``'s team sections): base vs tuned inside each team.
- ``inputs``: ``{name: {"path", "found", "note"}}``: what the report read.

``provenance`` is a string or ``{"data": ..., "models": ..., ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TAGGING_METRICS = (("accuracy", "Accuracy"), ("precision", "Precision"), ("recall", "Recall"), ("f1", "F1-score"))
HTS_COLUMNS = (("humanized", "H"), ("teaching", "T"), ("safety", "S"))
HTS_TITLES = {
    "1": "Table 1 layout: fine-tuned models vs their raw models (HTS)",
    "2": "Table 2 layout: fine-tuned models vs reference models with and without the RAM2C team (HTS)",
    "3": "Table 3 layout: ablations of the RAM2C team vs the full team (HTS)",
}
SYSTEM_NAMES = {
    "embedding": "Embedding similarity",
    "plm": "PLM fine-tuning",
    "single_llm": "Single LLM",
    "team": "Multi-agent team",
}


@dataclass
class Table:
    """A titled table: header ``columns``, body ``rows`` (cells as text; ``**x**`` = bold), an
    optional first header row of ``(label, span)`` groups, and the provenance ``note``."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    groups: list[tuple[str, int]] = field(default_factory=list)


def provenance_line(provenance: Any, *, offline: bool) -> str:
    """``"Data: ...; models: ..."`` (+ the offline-default label) from a string or a dict."""
    if isinstance(provenance, Mapping):
        text = "; ".join(f"{k}: {v}" for k, v in provenance.items())
        text = text[:1].upper() + text[1:]
    else:
        text = str(provenance or "Provenance not recorded")
    text = text.rstrip(".") + "."
    if offline:
        text += " Offline default: small CPU models on the demo data, not comparable to the papers' numbers."
    return text


def percent(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}"


def _bold_best(cells: list[str], values: list[float | None]) -> list[str]:
    known = [v for v in values if v is not None]
    if len(known) < 2:
        return cells
    best = max(known)
    return [f"**{c}**" if v == best else c for c, v in zip(cells, values, strict=True)]


TAGGING_COSTS = (
    ("llm_calls_per_question", "LLM calls / question"),
    ("tokens_per_question", "Tokens / question"),
    ("failed_subtasks", "Failed sub-tasks"),
    ("numerical", "Programs run (printed a verdict)"),
)
TAGGING_METHODS = ("embedding", "plm", "single_llm", "team")
FAILURE_WORDS = {"wrong": "counts as wrong", "no": "counts as No", "omit": "is left out of the scores"}


def _method_header(method: str, rows: Mapping[str, Any]) -> str:
    """A method's column: its name, and for the non-LLM baselines their encoder (one per run)."""
    name = SYSTEM_NAMES.get(method, method)
    if method not in ("embedding", "plm"):
        return name
    found = next((r["systems"][method] for r in rows.values() if method in r["systems"]), {})
    backbone = found.get("backbone") or ""
    if method == "plm" and found.get("learning_rate") is not None:
        backbone += f", lr {found['learning_rate']:g}"
    return f"{name} ({backbone})" if backbone else name


def _cost_cell(key: str, system: Mapping[str, Any] | None) -> str:
    value = None if system is None else system.get(key)
    if value is None:
        return "-"
    if key == "numerical":
        return f"{value['programs_run']} ({value['verdicts']})"
    return f"{value:.2f}" if key == "llm_calls_per_question" else f"{value:.0f}"


def tagging_section(metrics: Mapping[str, Any], *, models: str | None = None) -> dict[str, Any]:
    """The tagging Table 4 section of one generation run: a row per model size (``Base``, and each
    of ``tagging.sizes``), named by its model (the team's backbone, else the single LLM's), with
    each method's scores; the embedding and PLM baselines sit on the first size's row. The
    provenance names the data, the split, each system's backbone (``models`` when none is
    recorded) and the failure policy."""
    rows: dict[str, dict[str, Any]] = {}
    for name, system in metrics["systems"].items():
        method, _, size = name.partition("@")
        row = rows.setdefault(system.get("size") or size or "Base", {"model": "", "systems": {}})
        row["systems"][system.get("method") or method] = system
    for row in rows.values():  # "smollm2" or "smollm2 (team's numerical judge: gpt-4o)"
        llm = row["systems"].get("team") or row["systems"].get("single_llm") or {}
        main, *others = (llm.get("backbone") or "-").split("; ")
        row["model"] = main + (f" (team's {'; '.join(others)})" if others else "")
    split = metrics.get("split") or {}
    data = f"{metrics.get('n_evaluated', '?')} evaluated pairs (evaluation split"
    data += f" by {split['by']})" if split.get("by") else ")"
    data += f" of {metrics['n_pairs']} labelled pairs" if "n_pairs" in metrics else ""
    data += f" from {metrics['data']}" if metrics.get("data") else ""
    if "n_demonstration_pool" in metrics:
        data += (
            f"; {metrics['n_demonstration_pool']} generation pairs for demonstrations and baseline training,"
            f" {metrics.get('n_generation_run', 0)} of them run by the team for SFT rows"
        )
    backbones = "; ".join(f"{s}: {m.get('backbone')}" for s, m in metrics["systems"].items() if m.get("backbone"))
    provenance = {"data": data, "models": backbones or models or "not recorded"}
    if metrics.get("output_mode") == "json" and metrics.get("program"):
        provenance["LLM replies"] = f"json mode, numerical checks written as {metrics['program']} (run in the sandbox)"
    elif metrics.get("output_mode"):
        provenance["LLM replies"] = f"{metrics['output_mode']} mode"
    return {"models": rows, "provenance": provenance, "failure_outcome": metrics.get("failure_outcome")}


def tagging_table(section: Mapping[str, Any], *, offline: bool = False) -> Table:
    """The tagging paper's Table 4 layout: rows metric x model size (the model named per row),
    a column per method (the best score of a row in bold); then coverage and cost rows, and a note
    with the provenance and the failure policy. A generate-stage ``metrics.json`` (top-level
    ``systems``) is read through :func:`tagging_section`."""
    if "models" not in section:
        section = tagging_section(section)
    rows = section["models"]
    found = {m for r in rows.values() for m in r["systems"]}
    methods = [m for m in TAGGING_METHODS if m in found] + sorted(found - set(TAGGING_METHODS))
    body = []
    for key, label in (*TAGGING_METRICS, ("coverage", "Coverage")):
        for i, (size, row) in enumerate(rows.items()):
            values = [row["systems"].get(m, {}).get("overall", {}).get(key) for m in methods]
            cells = [percent(v) for v in values]
            body.append([label if i == 0 else "", size, row.get("model") or size, *(
                cells if key == "coverage" else _bold_best(cells, values))])  # fmt: skip
    for key, label in TAGGING_COSTS:
        if any(key in s for r in rows.values() for s in r["systems"].values()):
            for i, (size, row) in enumerate(rows.items()):
                cells = [_cost_cell(key, row["systems"].get(m)) for m in methods]
                body.append([label if i == 0 else "", size, row.get("model") or size, *cells])
    note = provenance_line(section.get("provenance"), offline=offline)
    outcome = section.get("failure_outcome")
    if outcome:
        note += (
            f" Scores in %; coverage = answered / evaluated pairs; a failed sample (the system crashed, its reply never"
            f" parsed, or its verdict hangs on a failed sub-task) {FAILURE_WORDS.get(outcome, outcome)}"
            f" (tagging.failure_outcome: {outcome})."
        )
    return Table(
        "Knowledge tagging (Table 4 layout)",
        ["Metric", "Model size", "Model", *[_method_header(m, rows) for m in methods]],
        body,
        note,
    )


def _signed(value: float, scale: float) -> str:
    return f"{scale * value:+.1f}"


def _min_items_note(rows: Sequence[Mapping[str, Any]]) -> str:
    least = {r["min_items"] for r in rows if r.get("min_items")}
    return f" Intervals need at least {max(least)} items (evaluate.bootstrap.min_items)." if least else ""


def deltas_table(rows: Sequence[Mapping[str, Any]], *, provenance: Any = None, offline: bool = False) -> Table:
    """Tuned vs base per team, system and metric: both values, the delta and its 95% interval
    ("n too small" under ``evaluate.bootstrap.min_items`` items). Rates (metric values in [0, 1]) are
    shown x100; HTS scores (``scale`` 1) as they are."""
    body = []
    for r in rows:
        scale = float(r.get("scale", 100))
        low, high = r.get("ci") or (None, None)
        if low is None:  # the bootstrap's "n too small" below its min_items, with the count
            note, n = r.get("ci_note"), r.get("n")
            interval = (f"{note} (n={n})" if isinstance(n, int) else note) if note else "-"
        else:
            interval = f"[{_signed(low, scale)}, {_signed(high, scale)}]"
        body.append(
            [
                str(r.get("team", "")),
                str(r.get("system", "")),
                str(r["metric"]),
                f"{scale * r['base']:.1f}",
                f"{scale * r['tuned']:.1f}",
                _signed(r["delta"], scale),
                interval,
                str(r.get("n", "")),
            ]
        )
    return Table(
        "Tuned vs base, with paired bootstrap 95% intervals",
        ["Team", "System", "Metric", "Base", "Tuned", "Delta", "95% interval", "Items"],
        body,
        provenance_line(provenance, offline=offline) + _min_items_note(rows),
    )


def kgc_table(section: Mapping[str, Any], *, offline: bool = False) -> Table:
    """CooperKGC's Table 2 layout: methods x datasets grouped by task, F1 with (+gain) over the reference."""
    datasets = list(section["datasets"])
    groups: list[tuple[str, int]] = [("", 1)]
    for d in datasets:
        if groups[-1][0] == d["task"]:
            groups[-1] = (d["task"], groups[-1][1] + 1)
        else:
            groups.append((d["task"], 1))
    references = section.get("reference", {})
    body = []
    for method, scores in section["rows"].items():
        reference = section["rows"].get(references.get(method, ""), {})
        cells = []
        for d in datasets:
            value = scores.get(d["name"])
            cell = percent(value)
            if value is not None and reference.get(d["name"]) is not None:
                cell += f" ({_signed(value - reference[d['name']], 100)})"
            cells.append(cell)
        body.append([method, *cells])
    return Table(
        "Knowledge graph construction, F1 (CooperKGC Table 2 layout)",
        ["Model", *[d.get("label", d["name"]) for d in datasets]],
        body,
        provenance_line(section.get("provenance"), offline=offline),
        groups,
    )


def kgc_ee_table(section: Mapping[str, Any], *, offline: bool = False) -> Table:
    """EE trigger and argument F1 of every system (Table 2 shows the argument F1)."""
    names = [d["name"] for d in section["datasets"] if d["task"].upper() == "EE"]
    body = [
        [method, *[percent((by_dataset.get(n) or {}).get(kind)) for n in names for kind in ("trigger", "argument")]]
        for method, by_dataset in section.get("ee", {}).items()
    ]
    return Table(
        "Event extraction, trigger and argument F1 (CooperKGC Table 2 shows argument F1)",
        ["Model", *[f"{n} {kind}" for n in names for kind in ("trigger", "argument")]],
        body,
        provenance_line(section.get("provenance"), offline=offline),
        [("", 1), *[(n, 2) for n in names]],
    )


def kgc_rounds_table(section: Mapping[str, Any], *, offline: bool = False) -> Table:
    """F1 per collaboration round (CooperKGC's rounds figure, as a table)."""
    rounds = section["rounds"]
    width = max(len(v) for v in rounds.values())
    body = [[name, *[percent(v) for v in values], *["-"] * (width - len(values))] for name, values in rounds.items()]
    return Table(
        "Knowledge graph construction, F1 per round (CooperKGC rounds figure)",
        ["Series", *[f"Round {r}" for r in range(width)]],
        body,
        provenance_line(section.get("rounds_provenance", section.get("provenance")), offline=offline),
    )


def hts_cell(result: Mapping[str, Any] | None) -> str:
    """``74.8 (0.42) [70.1, 79.0]``: score, Fleiss' kappa between distinct raters (``sc 0.42``: the
    self-consistency of seeds of one model instead), bootstrap interval (``-`` when missing; ``n too
    small`` instead of an interval over fewer items than the run's minimum; ``no valid judge`` when
    every judge was withheld)."""
    if result and result.get("no_valid_judge"):
        return "no valid judge"
    if not result or result.get("score") is None:
        return "-"
    kappa, consistency = result.get("kappa"), result.get("self_consistency")
    agreement = f"{kappa:.2f}" if kappa is not None else f"sc {consistency:.2f}" if consistency is not None else "-"
    cell = f"{result['score']:.1f} ({agreement})"
    if result.get("ci"):
        cell += f" [{result['ci'][0]:.1f}, {result['ci'][1]:.1f}]"
    elif result.get("ci_note"):
        cell += f" {result['ci_note']} (n={result.get('items', '?')})"
    return cell


def _share(counts: Mapping[str, Any], validity: Mapping[str, Any] | None = None) -> str:
    """``48% (12/25)`` of a judge's A/B decisions that went to the first reply; flagged above 80% one
    way; ``withheld`` (with the binomial p-value) when the judge failed the validity rule."""
    decided = counts.get("A", 0) + counts.get("B", 0)
    if not decided:
        return "-"
    cell = f"{100 * counts['A'] / decided:.0f}% ({counts['A']}/{decided})"
    if validity and validity.get("flagged"):
        p_value = validity.get("p_value")
        return f"**{cell} withheld**" + (f" (p={p_value:.2g})" if p_value is not None else "")
    return f"**{cell} one position**" if counts.get("flagged") else cell


def position_table(number: str, table: Mapping[str, Any]) -> Table | None:
    """Each judge's first-position share per comparison row of one HTS table (positions are
    balanced, so a fair judge is near 50%); a share above 80% either way is flagged."""
    shares = table.get("position_preference") or {}
    judges = list(dict.fromkeys(j for row in shares.values() for j in row))
    if not judges:
        return None
    validity = table.get("validity") or {}
    body = [
        [
            label,
            _ties(validity.get(label)),
            *[_share(shares[label].get(j, {}), _judged(validity, label, j)) for j in judges],
        ]
        for label in shares
    ]
    flagged = [f"{j} in {label}" for label in shares for j in judges if shares[label].get(j, {}).get("flagged")]
    note = (
        "Share of each judge's A/B decisions that chose the reply shown first (half the items show the system first);"
        " ties: pairs whose replies are the same text (normalised), scored equal without a judge call."
    )
    withheld = {
        j: f"{j} ({v['why']})"
        for label in validity
        for j, v in (validity[label].get("judges") or {}).items()
        if v.get("flagged")
    }
    if withheld:
        note += f" Withheld from the scores, kappa and deltas: {'; '.join(withheld.values())}."
    elif flagged:
        where = "; ".join(flagged)
        note += f" Flag: one position in more than 80% of the decisions of {where}: position bias, not preference."
    note += untested_note(validity)
    return Table(f"Table {number}: judges' validity", ["Comparison", "Ties", *judges], body, note)


def untested_note(validity: Mapping[str, Any]) -> str:
    """`` Validity not tested ...`` naming the judges of each row that had fewer verdicts than the
    validity rule needs (they are neither withheld nor shown to pass); empty when every judge was tested."""
    untested = {
        f"{j} in {label} ({v.get('verdicts', 0)} verdicts)": v.get("min_verdicts", 0)
        for label, row in validity.items()
        for j, v in (row.get("judges") or {}).items()
        if v.get("tested") is False
    }
    if not untested:
        return ""
    least = min(untested.values())
    return f" Validity not tested (fewer than {least} verdicts, too few to judge): {'; '.join(untested)}."


def _ties(validity: Mapping[str, Any] | None) -> str:
    ties = (validity or {}).get("ties") or {}
    return f"{ties['ties']}/{ties['items']}" if ties.get("items") else "-"


def _judged(validity: Mapping[str, Any], label: str, judge: str) -> Mapping[str, Any]:
    return ((validity.get(label) or {}).get("judges") or {}).get(judge) or {}


def hts_tables(section: Mapping[str, Any], *, offline: bool = False) -> list[Table]:
    """RAM2C's Tables 1-3 layout (those present): comparison rows, H / T / S columns; after each,
    its judges' first-position shares (:func:`position_table`)."""
    tables = []
    for number, table in sorted(section.get("tables", {}).items()):
        body = [[label, *[hts_cell(dims.get(d)) for d, _ in HTS_COLUMNS]] for label, dims in table["rows"].items()]
        note = provenance_line(table.get("provenance", section.get("provenance")), offline=offline)
        note += " Cells: score (Fleiss' kappa between distinct models; sc: self-consistency of seeds of one model)"
        note += " [bootstrap 95% interval]; 50 = parity; ties scored equal."
        shares = table.get("position_preference") or {}
        validity = table.get("validity") or {}
        if any(v.get("flagged") for row in validity.values() for v in (row.get("judges") or {}).values()):
            note += " Judges failing the validity rule are withheld from the cells (next table says why)."
        elif any(c.get("flagged") for row in shares.values() for c in row.values()):
            note += " Position bias: a judge chose one position in more than 80% of its decisions (next table)."
        tables.append(
            Table(
                table.get("title", HTS_TITLES.get(str(number), f"HTS table {number}")),
                ["Criteria", *[letter for _, letter in HTS_COLUMNS]],
                body,
                note,
            )
        )
        positions = position_table(str(number), table)
        if positions is not None:
            tables.append(positions)
    return tables


LOSS_POINTS_SHOWN = 8
"""Loss points written out in a cell; a longer curve shows that many, evenly spaced (the plot has all)."""


def loss_curve_cell(points: Sequence[Sequence[float]]) -> str:
    """``step: loss`` of every logged point (at most :data:`LOSS_POINTS_SHOWN`, evenly spaced, first and last kept)."""
    if not points:
        return "-"
    shown = points
    if len(points) > LOSS_POINTS_SHOWN:
        last = len(points) - 1
        shown = [points[round(i * last / (LOSS_POINTS_SHOWN - 1))] for i in range(LOSS_POINTS_SHOWN)]
    cell = " · ".join(f"{int(step)}: {loss:.3f}" for step, loss in shown)
    return cell if len(shown) == len(points) else f"{cell} ({len(points)} points; plot below)"


def eval_cell(evaluation: Mapping[str, Any] | None) -> str:
    """The trainer's evaluation metrics: loss, and for DPO the reward margin and accuracy."""
    names = {"loss": "loss", "rewards/margins": "reward margin", "rewards/accuracies": "reward accuracy"}
    evaluation = evaluation or {}
    parts = [f"{label} {evaluation[key]:.4g}" for key, label in names.items() if evaluation.get(key) is not None]
    return "; ".join(parts) or "-"


def probe_cell(probe: Mapping[str, Any] | None) -> str:
    """The lm_head parity probe: the trainer's log-probs against a plain forward of the model."""
    if not probe:
        return "-"
    verdict = "passed" if probe.get("passed") else "**failed**"
    return (f"{verdict}: {probe.get('path', '?')} head, mean/max diff {probe.get('mean_abs_diff', 0):.1e}/"
            f"{probe.get('max_abs_diff', 0):.1e} over {probe.get('rows', '?')} rows")


def training_table(section: Mapping[str, Any], *, offline: bool = False) -> Table:
    """Per training run: rows trained and held out, the logged loss curve, the trainer's evaluation
    metrics and the lm_head parity probe."""
    body = []
    for run, result in section["runs"].items():
        rows = f"{result.get('train_rows', '?')} / {result.get('eval_rows', '?')}"
        body.append([run, str(result.get("method", "")), rows, loss_curve_cell(result.get("loss", [])),
                     eval_cell(result.get("eval")), probe_cell(result.get("probe"))])  # fmt: skip
    return Table(
        "Fine-tuning runs",
        ["Run", "Method", "Rows (train / eval)", "Training loss by step", "Evaluation", "Parity probe"],
        body,
        provenance_line(section.get("provenance"), offline=offline),
    )


def _reasons(counts: Mapping[str, int] | None) -> str:
    return "; ".join(f"{reason} {n}" for reason, n in (counts or {}).items()) or "-"


def ram2c_tables(section: Mapping[str, Any], *, offline: bool = False) -> list[Table]:
    """The RAM2C team's generation run (``generate_ram2c`` metrics): what it kept, and group
    reflection per expert group (documents retrieved and accepted by vote, yes-vote share, cost)."""
    note = provenance_line(section.get("provenance"), offline=offline)
    overview = Table(
        "Tutoring dialogue generation (RAM2C team)",
        ["Dialogues", "Turns", "Pairs kept", "Pairs dropped", "Dropped by reason", "LLM calls / dialogue",
         "Tokens / dialogue", "Chosen chars", "Rejected chars"],
        [[str(section.get("dialogues", "-")), str(section.get("turns", "-")), str(section.get("pairs_kept", "-")),
          str(section.get("pairs_dropped", "-")), _reasons(section.get("dropped_by_reason")),
          f"{section.get('llm_calls_per_dialogue', 0):.1f}", f"{section.get('tokens_per_dialogue', 0):.0f}",
          f"{section.get('mean_chars_chosen', 0):.0f}", f"{section.get('mean_chars_rejected', 0):.0f}"]],
        note,
    )  # fmt: skip
    tables = [overview]
    groups = section.get("groups") or {}
    if groups:
        body = [
            [name, str(g.get("turns", 0)), f"{g.get('retrieved_per_turn', 0):.2f}",
             f"{g.get('accepted_per_turn', 0):.2f}", percent(g.get("accepted_share")), percent(g.get("yes_share")),
             f"{g.get('llm_calls_per_turn', 0):.1f}", f"{g.get('tokens_per_turn', 0):.0f}"]
            for name, g in groups.items()
        ]  # fmt: skip
        tables.append(
            Table(
                "Group reflection per expert group (RAM2C)",
                ["Group", "Turns", "Retrieved / turn", "Accepted / turn", "Accepted share", "Yes votes",
                 "LLM calls / turn", "Tokens / turn"],
                body,
                note + " Shares in %.",
            )
        )  # fmt: skip
    voters = voters_table(section.get("voters") or {}, note)
    if voters is not None:
        tables.append(voters)
    return tables


def voters_table(voters: Mapping[str, Any], note: str) -> Table | None:
    """Each voter role's ballots (group reflection): how often it cast its most common ballot and the
    share of documents it accepted; a constant voter (the same ballot whatever the documents) is
    flagged, its acceptances are not a judgment of the content."""
    if not voters:
        return None
    body = [
        [name, str(v.get("verdicts", 0)), str(v.get("constant_verdict")), percent(v.get("constant_share")),
         percent(v.get("accepted_share")), _voter_validity(v)]
        for name, v in voters.items()
    ]  # fmt: skip
    flagged = [name for name, v in voters.items() if v.get("flagged")]
    if flagged:
        note += f" Constant voter(s) {', '.join(flagged)}: the accepted share is a constant, not a judgment."
    return Table(
        "Voters' ballot validity (RAM2C group reflection)",
        ["Voter", "Ballots", "Most common ballot", "Same ballot", "Accepted", "Validity"],
        body,
        note + " Shares in %.",
    )


def _voter_validity(voter: Mapping[str, Any]) -> str:
    if voter.get("flagged"):
        return f"**constant voter**: {voter['why']}"
    if voter.get("tested") is False:
        return f"not tested (fewer than {voter.get('min_verdicts', '?')} ballots)"
    return "-"


def _numbers(data: Any, prefix: str = "") -> dict[str, float]:
    if isinstance(data, Mapping):
        out: dict[str, float] = {}
        for key, value in data.items():
            out.update(_numbers(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return {prefix: float(data)}
    return {}


def _value(value: float | None, rate: bool) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}" if rate else f"{value:g}"


TEAM_TITLES = {"tagging": "Knowledge tagging", "kgc": "Knowledge graph construction", "tutoring": "Tutoring"}


def base_tuned_table(team: str, section: Mapping[str, Any], *, offline: bool = False) -> Table:
    """``{"base": {metric: value}, "tuned": {...}, "n", "provenance"}`` (nested metrics dotted):
    one row per metric with base, tuned and their difference; rates (both in [0, 1]) in %."""
    base, tuned = _numbers(section.get("base")), _numbers(section.get("tuned"))
    body = []
    for metric in dict.fromkeys([*base, *tuned]):
        b, t = base.get(metric), tuned.get(metric)
        rate = all(v is None or 0.0 <= v <= 1.0 for v in (b, t))
        delta = "-" if b is None or t is None else (_signed(t - b, 100) if rate else f"{t - b:+g}")
        body.append([metric, _value(b, rate), _value(t, rate), delta])
    items = f" {section['n']} held-out items." if section.get("n") is not None else ""
    return Table(
        f"{TEAM_TITLES.get(team, team)}: base vs tuned model inside the team",
        ["Metric", "Base", "Tuned", "Difference"],
        body,
        provenance_line(section.get("provenance"), offline=offline) + items + " Rates in %.",
    )


def inputs_table(inputs: Mapping[str, Mapping[str, Any]]) -> Table:
    """What the report read: ``{name: {"path", "found", "note"}}``, one row each."""
    body = [[name, str(i.get("path", "")), "found" if i.get("found") else str(i.get("note") or "missing")]
            for name, i in inputs.items()]  # fmt: skip
    return Table(
        "Inputs of this report",
        ["Input", "File", "Status"],
        body,
        "A missing input leaves its section out; run the stage that writes it (dvc repro) and the report again.",
    )
