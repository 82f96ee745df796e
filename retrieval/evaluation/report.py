"""The evaluation's figures as a readable table and as JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path


def percent(value: float) -> str:
    return f"{value * 100:.1f}"


def _ndcg_k(ks: Sequence[int]) -> int:
    # One nDCG column keeps the table narrow: @10 when measured, else the largest k.
    return 10 if 10 in ks else max(ks)


def _rows_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(headers[i]), *(len(row[i]) for row in rows)) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest])

    return [line(headers), "  ".join("-" * width for width in widths), *map(line, rows)]


def ranking_cells(figures: dict, ks: Sequence[int]) -> list[str]:
    ndcg_k = str(_ndcg_k(ks))
    return [
        str(figures["queries"]),
        *(percent(figures["recall"][str(k)]) for k in ks),
        percent(figures["ndcg"][ndcg_k]),
        f"{figures['mrr']:.3f}",
    ]


def ranking_headers(first: str, ks: Sequence[int]) -> list[str]:
    return [first, "n", *(f"R@{k}" for k in ks), f"nDCG@{_ndcg_k(ks)}", "MRR"]


def block_cells(block: dict) -> list[str]:
    return [
        percent(block["hit_rate"]),
        f"{block['memories']:.1f}",
        f"{block['tokens']:.0f}",
        percent(block["precision"]),
    ]


BLOCK_HEADERS = ["block hit", "mem/block", "tok/block", "block prec"]


def render_table(report: dict) -> str:
    ks = report["ks"]
    dataset = report["dataset"]
    embedding = report["embedding"]
    lines = [
        f"{dataset['name']}: {len(dataset['conversations'])} conversations, "
        f"{dataset['memories']} memories, {dataset['queries']} queries; "
        f"embeddings: {embedding['provider']}"
        + (f" ({embedding['dimensions']}-d)" if embedding["dimensions"] else "")
        + f"; token budget {report['token_budget']}",
        "R@k, nDCG in % over the ranking before packing; block hit: % of queries whose "
        "block holds a relevant memory; memories and tokens of the mean block; block "
        "precision: % of packed memories that are relevant; block tokens per relevant "
        "memory packed; latency of one recall call.",
        "",
    ]
    headers = [
        *ranking_headers("run", ks),
        *BLOCK_HEADERS,
        "tok/relevant",
        "p50 ms",
        "p95 ms",
    ]
    rows = [
        [
            run["label"],
            *ranking_cells(run["overall"], ks),
            *block_cells(run["block"]),
            f"{run['block']['tokens_per_relevant']:.0f}"
            if run["block"]["tokens_per_relevant"] is not None
            else "-",
            f"{run['latency_ms']['p50']:.1f}",
            f"{run['latency_ms']['p95']:.1f}",
        ]
        for run in report["runs"]
    ]
    lines += _rows_table(headers, rows)

    widest = max((len(run["legs"]) for run in report["runs"] if run["legs"]), default=0)
    for run in report["runs"]:
        if run["legs"] is not None and len(run["legs"]) < widest:
            continue  # ablation subsets: their overall figures are enough here
        for part, title in (("by_category", "category"), ("by_conversation", "conversation")):
            rows = [
                [name, *ranking_cells(figures, ks), *block_cells(figures["block"])]
                for name, figures in run[part].items()
            ]
            lines += ["", f"{run['label']} by {title}:"]
            lines += _rows_table([*ranking_headers(title, ks), *BLOCK_HEADERS], rows)

    failures = {run["label"]: run["failed_legs"] for run in report["runs"] if run["failed_legs"]}
    if failures:
        lines += ["", "Legs that failed or timed out (queries affected):"]
        for label, legs in failures.items():
            lines.append(f"  {label}: " + ", ".join(f"{leg} ×{n}" for leg, n in legs.items()))
    return "\n".join(lines)


def write_json(report: dict, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
