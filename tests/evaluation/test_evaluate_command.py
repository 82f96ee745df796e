"""`manage.py evaluate` end to end on tiny-eval.json, against hand-computed figures.

No embedding provider in tests, so the text and entity legs carry recall. The
rankings the figures rest on, worked out from the memories' English lexemes
(``to_tsvector('english', …)``) and entities (all memories are a day old, so
decay and type weight scale every score alike and change no order):

trip
  Q1 "Where did they rent kayaks?" {rent, kayak}; evidence t1
     text: t1 (rent, kayak) > t2 (kayak); entity: none named.
     ranking t1, t2 → R@1 1, R@5 1, RR 1, nDCG@1 1, nDCG@5 1
  Q2 "What did Ana eat at the cabin of Marguerite?" {ana, eat, cabin, marguerit}; evidence t3
     text: t5 (3 lexemes) > t3 (2) > t1, t6 (1 each); entity: "Marguerite" → t5.
     ranking t5, t3, … → R@1 0, R@5 1, RR 1/2, nDCG@1 0, nDCG@5 1/log2(3) = 0.63093
  Q3 "Are snow chains needed, and what did dinner cost?" evidence t4, t6
     text: t4 (snow, chain) > t3 (dinner); t6 shares nothing with the query.
     ranking t4, t3 → R@1 1/2, R@5 1/2, RR 1, nDCG@1 1,
     nDCG@5 = 1 / (1 + 1/log2(3)) = 0.61315
  Q4 "What colour was the canoe?" {colour, cano}; evidence t2 — nothing matches.
     ranking empty → every figure 0
home
  Q5 "Where is the kayak stored in winter?" {kayak, store, winter}; evidence h1
     text: h1 (kayak, winter); the trip's kayak memories belong to another owner.
     ranking h1 → R@1 1, R@5 1, RR 1, nDCG 1

Overall (5 queries): R@1 (1+0+.5+0+1)/5 = 0.5, R@5 (1+1+.5+0+1)/5 = 0.7,
nDCG@1 (1+0+1+0+1)/5 = 0.6, nDCG@5 (1+.63093+.61315+0+1)/5 = 0.64882,
MRR (1+.5+1+0+1)/5 = 0.7.
single-hop (Q1, Q2, Q5): R@1 2/3, R@5 1, MRR 2.5/3; multi-hop (Q3): R@1 .5, MRR 1;
adversarial (Q4): 0. trip: R@5 (1+1+.5+0)/4 = .625; home: R@5 1.
Entity leg alone: only Q2 names an entity, and finds t5, not the evidence → all 0.

Blocks (the default profile ends each where the scores fall off): Q1 t1, t2;
Q2 t5, t3 (t1 and t6 fall off); Q3 t4, t3; Q4 none; Q5 h1. Block hit rate
4/5 = 0.8, memories (2+2+2+0+1)/5 = 1.4, precision over the four blocks
(1/2+1/2+1/2+1)/4 = 0.625; single-hop: hit 1, memories 5/3, precision
(1/2+1/2+1)/3 = 2/3; multi-hop: hit 1, memories 2, precision 1/2;
adversarial: hit 0, memories 0.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from memories.models import Memory

TINY = str(Path(__file__).with_name("tiny-eval.json"))

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_embeddings(settings):
    settings.EMBEDDING_PROVIDER = "none"


def evaluate(*args: str) -> tuple[str, dict]:
    out, err = StringIO(), StringIO()
    json_path = Path(f"/tmp/tiny-eval-report-{id(out)}.json")
    call_command("evaluate", TINY, *args, "--json", str(json_path), stdout=out, stderr=err)
    report = json.loads(json_path.read_text())
    json_path.unlink()
    return out.getvalue(), report


def run_named(report: dict, label: str) -> dict:
    return next(run for run in report["runs"] if run["label"] == label)


def test_it_measures_the_fusion_pipeline_against_hand_computed_figures():
    home_database = connection.settings_dict["NAME"]
    table, report = evaluate("--pipeline", "fusion", "--k", "1,5")

    assert report["ks"] == [1, 5]
    assert report["dataset"]["memories"] == 8
    assert report["embedding"]["provider"] == "none"
    fusion = run_named(report, "fusion")
    overall = fusion["overall"]
    assert overall["queries"] == 5
    assert overall["recall"]["1"] == pytest.approx(0.5)
    assert overall["recall"]["5"] == pytest.approx(0.7)
    assert overall["ndcg"]["1"] == pytest.approx(0.6)
    assert overall["ndcg"]["5"] == pytest.approx(0.64882, abs=1e-5)
    assert overall["mrr"] == pytest.approx(0.7)

    single = fusion["by_category"]["single-hop"]
    assert single["queries"] == 3
    assert single["recall"]["1"] == pytest.approx(2 / 3)
    assert single["recall"]["5"] == 1.0
    assert single["mrr"] == pytest.approx(2.5 / 3)
    assert fusion["by_category"]["multi-hop"]["recall"]["5"] == 0.5
    assert fusion["by_category"]["multi-hop"]["mrr"] == 1.0
    assert fusion["by_category"]["adversarial"]["mrr"] == 0.0
    assert fusion["by_conversation"]["trip"]["recall"]["5"] == pytest.approx(0.625)
    assert fusion["by_conversation"]["home"]["recall"]["5"] == 1.0

    per_query = {item["query"]: item for item in fusion["per_query"]}
    assert per_query["What did Ana eat at the cabin of Marguerite?"]["ranks"] == {"t3": 2}
    assert per_query["Are snow chains needed, and what did dinner cost?"]["ranks"] == {
        "t4": 1,
        "t6": None,
    }
    canoe = per_query["What colour was the canoe?"]
    assert canoe["candidates"] == 0 and canoe["block_tokens"] == 0 and canoe["packed"] == 0

    tokens = fusion["tokens_per_block"]
    assert 0 < tokens["mean"] <= tokens["max"] <= report["token_budget"]
    assert 0 < fusion["latency_ms"]["p50"] <= fusion["latency_ms"]["p95"]
    assert fusion["failed_legs"] == {}

    block = fusion["block"]
    assert block["hit_rate"] == pytest.approx(0.8)
    assert block["memories"] == pytest.approx(1.4)
    assert block["tokens"] == pytest.approx(tokens["mean"])
    assert block["precision"] == pytest.approx(0.625)
    single_block = fusion["by_category"]["single-hop"]["block"]
    assert single_block["hit_rate"] == 1.0
    assert single_block["memories"] == pytest.approx(5 / 3)
    assert single_block["precision"] == pytest.approx(2 / 3)
    multi_block = fusion["by_category"]["multi-hop"]["block"]
    assert (multi_block["hit_rate"], multi_block["memories"]) == (1.0, 2.0)
    assert multi_block["precision"] == 0.5
    adversarial_block = fusion["by_category"]["adversarial"]["block"]
    assert (adversarial_block["hit_rate"], adversarial_block["memories"]) == (0.0, 0.0)
    assert fusion["by_conversation"]["home"]["block"]["hit_rate"] == 1.0

    # The table shows the same figures, as percentages.
    fusion_row = next(line for line in table.splitlines() if line.startswith("fusion "))
    assert fusion_row.split()[1:10] == [
        "5",
        "50.0",
        "70.0",
        "64.9",
        "0.700",
        "80.0",
        "1.4",
        str(round(tokens["mean"])),
        "62.5",
    ]
    header = next(line for line in table.splitlines() if line.startswith("category "))
    assert header.split()[-5:] == ["hit", "mem/block", "tok/block", "block", "prec"]
    single_row = next(line for line in table.splitlines() if line.startswith("single-hop "))
    cells = single_row.split()
    assert cells[1:4] == ["3", "66.7", "100.0"]
    assert (cells[-4], cells[-3], cells[-1]) == ("100.0", "1.7", "66.7")
    assert "home" in table

    # Nothing was written to the real database, and the connection is back on it.
    assert connection.settings_dict["NAME"] == home_database
    assert Memory.objects.count() == 0


def test_it_ablates_each_leg_and_every_combination():
    table, report = evaluate("--pipeline", "fusion", "--legs", "entity,text", "--k", "1,5")

    assert [run["label"] for run in report["runs"]] == [
        "fusion [text]",
        "fusion [entity]",
        "fusion [text+entity]",
    ]
    text_only = run_named(report, "fusion [text]")["overall"]
    assert text_only["recall"]["5"] == pytest.approx(0.7)
    assert text_only["mrr"] == pytest.approx(0.7)
    entity_only = run_named(report, "fusion [entity]")["overall"]
    assert entity_only["recall"]["5"] == 0.0
    assert entity_only["mrr"] == 0.0
    both = run_named(report, "fusion [text+entity]")["overall"]
    assert both["recall"]["1"] == pytest.approx(0.5)
    assert "fusion [entity]" in table


def test_it_puts_both_pipelines_side_by_side():
    table, report = evaluate("--pipeline", "all", "--k", "1,5")

    assert [run["label"] for run in report["runs"]] == ["fusion", "freshness"]
    freshness = {item["query"]: item for item in run_named(report, "freshness")["per_query"]}
    assert freshness["Where did they rent kayaks?"]["ranks"] == {"t1": 1}
    assert freshness["What colour was the canoe?"]["candidates"] == 0
    assert "freshness" in table


@pytest.mark.parametrize(
    "args, message",
    [
        (["--legs", "vector,gossip"], "--legs takes"),
        (["--pipeline", "freshness", "--legs", "text"], "ablates the fusion pipeline"),
        (["--k", "0,5"], "--k takes"),
        (["--k", "five"], "--k takes"),
        (["--budget", "0"], "--budget must be"),
    ],
)
def test_it_rejects_bad_arguments(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("evaluate", TINY, *args, stdout=StringIO(), stderr=StringIO())


def test_it_rejects_an_invalid_dataset(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": "timothy-eval/1", "conversations": []}))
    with pytest.raises(CommandError, match="conversations must be a non-empty list"):
        call_command("evaluate", str(path), stdout=StringIO(), stderr=StringIO())
