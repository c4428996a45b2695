"""The projection of a real run from the simulated one: hours on 8 x A100 with vLLM, and dollars at
the list prices of ``benchmarks/prices.yaml``, per team and in total; written as
``reports/scale_projection.md`` (a table) and ``reports/scale_projection.json``.

Hours come from the run against 8 simulated servers (one A100 each, the engine model of
docs/scale.md): the stage's LLM phase (first request to last reply) times the compression factor
(virtual seconds: that phase at real speed, this machine's client overhead included, so an upper
estimate) plus the rest of the stage's wall time as measured here (start-up, models, baselines,
exports), and beside it the critical-path bound (the busiest server's work at the run's batch). A second column
prices the same work at 256 sequences per server (concurrency 2,048): the bound at that batch.
Dollars: the stage's prompt and completion tokens (usage.json) at each API's input and output price.

A run at a fraction ``f`` of the paper's counts (``fractions``, per team) is extrapolated to the
full counts: calls, tokens, dollars and both bounds times ``1/f`` (the work grows with the items);
hours as the full bound times the ratio the run measured (LLM phase over its bound; at least 1:
at a small fraction the chains' depth, not the servers' throughput, sets that phase, so the ratio
is pessimistic there) plus the stage's other wall time as measured (start-up and model loading,
not scaled). The measured figures are kept beside (``measured``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from pipelines.config import StrictModel
from pipelines.io import write_json_atomic
from tests.support.simserver.engine import EngineModel

PROJECT = Path(__file__).resolve().parents[2]


class Rate(StrictModel):
    per_usd: float = Field(gt=0)
    read: str
    source: str


class BatchPrice(StrictModel):
    """A provider batch API's price as a share of the online price (OpenAI, GLM: half)."""

    share: float = Field(gt=0, le=1)
    read: str
    source: str


class Api(StrictModel):
    name: str
    currency: str
    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)
    read: str
    source: str
    batch: BatchPrice | None = None


class Gpu(StrictModel):
    name: str
    gpus: int = Field(ge=1)


class Prices(StrictModel):
    currency_rates: dict[str, Rate] = {}
    apis: list[Api] = Field(min_length=1)
    gpu: Gpu

    def usd(self, api: Api, prompt_tokens: int, completion_tokens: int) -> float:
        cost = (prompt_tokens * api.input_per_million + completion_tokens * api.output_per_million) / 1e6
        if api.currency == "USD":
            return cost
        if api.currency not in self.currency_rates:
            raise ValueError(f"benchmarks/prices.yaml: no currency_rates entry for {api.currency} ({api.name})")
        return cost / self.currency_rates[api.currency].per_usd

    def usd_batch(self, api: Api, prompt_tokens: int, completion_tokens: int) -> float | None:
        """:meth:`usd` at the API's batch price; None for an API without a batch price."""
        if api.batch is None:
            return None
        return self.usd(api, prompt_tokens, completion_tokens) * api.batch.share


def load_prices(path: Path = PROJECT / "benchmarks/prices.yaml") -> Prices:
    return Prices.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def real_speed_s(team: dict[str, Any]) -> float:
    """The stage's duration at real speed: its LLM phase in virtual seconds (the servers' clock),
    the rest of its wall time (start-up, models, baselines, exports) as measured here."""
    phase, phase_v = team.get("llm_phase_s"), team.get("llm_phase_virtual_s")
    if phase is None or phase_v is None:
        return team["wall_virtual_s"]
    return phase_v + max(0.0, team["wall_s"] - phase)


def full_batch_bound(team: dict[str, Any], model: EngineModel) -> float:
    """Virtual seconds the busiest server needs for the team's work at ``max_num_seqs`` per server."""
    per_token = model.tpot(model.max_num_seqs) / model.max_num_seqs
    return max(
        (s["prompt_tokens"] - s["cached_tokens"]) / model.prefill_tokens_per_s + s["completion_tokens"] * per_token
        for s in team["servers"]
    )


def measured(team: dict[str, Any], model: EngineModel, prices: Prices) -> dict[str, Any]:
    """The run's own figures (no extrapolation)."""
    usage = team["usage"]
    return {
        "calls": usage["calls"],
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "hours": real_speed_s(team) / 3600,
        "bound_hours": team["bound_virtual_s"] / 3600,
        "hours_at_full_batch": full_batch_bound(team, model) / 3600,
        "usd": {a.name: prices.usd(a, usage["prompt_tokens"], usage["completion_tokens"]) for a in prices.apis},
        "usd_batch": {
            a.name: prices.usd_batch(a, usage["prompt_tokens"], usage["completion_tokens"])
            for a in prices.apis
            if a.batch is not None
        },
    }


def extrapolated(team: dict[str, Any], row: dict[str, Any], fraction: float) -> dict[str, Any]:
    """``row`` (the measured figures) at the paper's counts (module docstring)."""
    scale = 1.0 / fraction
    phase_v = team.get("llm_phase_virtual_s")
    ratio = max(1.0, phase_v / team["bound_virtual_s"]) if phase_v and team["bound_virtual_s"] else 1.0
    rest = max(0.0, team["wall_s"] - (team.get("llm_phase_s") or 0.0)) / 3600
    return {
        "fraction": fraction,
        "ratio_used": round(ratio, 3),
        "calls": round(row["calls"] * scale),
        "prompt_tokens": round(row["prompt_tokens"] * scale),
        "completion_tokens": round(row["completion_tokens"] * scale),
        "hours": row["bound_hours"] * scale * ratio + rest,
        "bound_hours": row["bound_hours"] * scale,
        "hours_at_full_batch": row["hours_at_full_batch"] * scale,
        "usd": {name: usd * scale for name, usd in row["usd"].items()},
        "usd_batch": {name: usd * scale for name, usd in row["usd_batch"].items()},
        "measured": row,
    }


def project(
    teams: dict[str, dict[str, Any]], model: EngineModel, prices: Prices, *, fractions: dict[str, float] | None = None
) -> dict[str, Any]:
    """Per team (and total): hours and dollars at the paper's counts (see the module docstring)."""
    rows: dict[str, dict[str, Any]] = {}
    for name, team in teams.items():
        rows[name] = extrapolated(team, measured(team, model, prices), (fractions or {}).get(name, 1.0))
    total = {
        key: sum(r[key] for r in rows.values())
        for key in ("calls", "prompt_tokens", "completion_tokens", "hours", "bound_hours", "hours_at_full_batch")
    }
    total["usd"] = {a.name: sum(r["usd"][a.name] for r in rows.values()) for a in prices.apis}
    total["usd_batch"] = {a.name: sum(r["usd_batch"][a.name] for r in rows.values()) for a in prices.apis if a.batch}
    rows["total"] = total
    return rows


def write_projection(result: dict[str, Any], prices: Prices, out_dir: Path) -> Path:
    """``scale_projection.{md,json}`` under ``out_dir``; returns the markdown file."""
    rows = result["projection"]
    apis = [a.name for a in prices.apis]
    batched = [a.name for a in prices.apis if a.batch is not None]
    lines = [
        "# What a paper-scale run costs (projection)",
        "",
        f"Measured {result['measured_on']} against {result['servers']} simulated vLLM servers (7B model, one "
        f"A100-80GB each; docs/scale.md), compression {result['compression']:g}, concurrency as the paper "
        f"profile sets it; item counts: {result['counts_line']}. Produced by `{result['command']}`.",
        "",
        "At the paper's counts (extrapolated from the share of the items each team ran, `run at`):",
        "",
        f"| team | run at | ratio | calls | prompt tokens | completion tokens | hours on {prices.gpu.name} at the "
        "ratio (upper) | bound (lower) | at 256 per GPU | "
        + " | ".join([*(f"USD {a}" for a in apis), *(f"USD {a} batch" for a in batched)])
        + " |",
        "|---|" + "---:|" * (8 + len(apis) + len(batched)),
    ]
    for name, row in rows.items():
        share = f"{100 * row['fraction']:.3g} %" if "fraction" in row else ""
        cells = [
            share,
            f"{row['ratio_used']:.2f}" if "ratio_used" in row else "",
            f"{row['calls']:,}",
            f"{row['prompt_tokens']:,}",
            f"{row['completion_tokens']:,}",
            f"{row['hours']:.2f}",
            f"{row['bound_hours']:.2f}",
            f"{row['hours_at_full_batch']:.2f}",
            *(f"{row['usd'][a]:,.2f}" for a in apis),
            *(f"{row.get('usd_batch', {}).get(a, 0.0):,.2f}" for a in batched),
        ]
        lines.append(f"| {'**total**' if name == 'total' else name} | " + " | ".join(cells) + " |")
    lines += ["", "As measured (the runs themselves, before extrapolation):", "",
              "| team | calls | prompt tokens | completion tokens | hours | bound | at 256 per GPU |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for name, row in rows.items():
        if "measured" in row:
            m = row["measured"]
            lines.append(f"| {name} | {m['calls']:,} | {m['prompt_tokens']:,} | {m['completion_tokens']:,} | "
                         f"{m['hours']:.3f} | {m['bound_hours']:.3f} | {m['hours_at_full_batch']:.3f} |")
    lines += ["", "Prices (benchmarks/prices.yaml):", ""]
    for api in prices.apis:
        lines.append(
            f"- {api.name}: {api.input_per_million:g} / {api.output_per_million:g} {api.currency} per million input "
            f"/ output tokens, read {api.read} ({api.source})"
            + (
                f"; batch API at {api.batch.share:g} of that, read {api.batch.read} ({api.batch.source})"
                if api.batch is not None
                else ""
            )
        )
    for currency, rate in prices.currency_rates.items():
        lines.append(f"- {rate.per_usd:g} {currency} per USD ({rate.source}, {rate.read})")
    lines += [
        "",
        "Hours (measured): the stage's LLM phase here times the compression (this machine's client cost included, "
        "so an upper estimate) plus the rest of its wall time as measured here; at the paper's counts: the bound "
        "times 1/share times the measured ratio (phase over bound, at least 1) plus that rest; bound: the busiest "
        "server's work at the run's batch; at 256 per GPU: the same work at vLLM's default 256 sequences per "
        "server (concurrency 2,048). Tokens by the Qwen2 tokenizer; reply lengths follow the simulated server's "
        "reply model (docs/scale.md), not a real model's.",
        "",
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = out_dir / "scale_projection.md"
    markdown.write_text("\n".join(lines), encoding="utf-8")
    write_json_atomic(out_dir / "scale_projection.json", {**result, "prices": json.loads(prices.model_dump_json())})
    return markdown
