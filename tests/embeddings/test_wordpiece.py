"""retrieval/wordpiece.py gives the token ids Hugging Face's tokenizers gives
(a test-only dependency), for the packaged all-MiniLM-L6-v2's tokenizer.json."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from retrieval.embeddings import default_local_model_path
from retrieval.wordpiece import TokenizerUnsupported, WordPieceTokenizer

tokenizers = pytest.importorskip("tokenizers")

DATA = Path(__file__).resolve().parent / "data"
MAX_LENGTH = 256  # sentence_bert_config.json's max_seq_length


@pytest.fixture(scope="module")
def pair():
    path = default_local_model_path() / "tokenizer.json"
    reference = tokenizers.Tokenizer.from_file(str(path))
    reference.enable_truncation(max_length=MAX_LENGTH)
    reference.no_padding()
    return reference, WordPieceTokenizer.from_file(path, max_length=MAX_LENGTH)


def differing(pair, texts: list[str]) -> list[str]:
    reference, ours = pair
    expected = reference.encode_batch(texts)
    return [
        text
        for text, encoding in zip(texts, expected, strict=True)
        if encoding.ids != ours.ids(text)
    ]


def test_it_tokenises_the_reference_texts_as_tokenizers_does(pair):
    texts = json.loads((DATA / "minilm_reference.json").read_text())["texts"]
    special = [
        "hello [MASK] world[CLS]x",  # added tokens written in the text
        "[PAD][UNK] [SEP]",
        "ΟΔΟΣ ΣΑΣ",  # no final-sigma rule when lowering
        "İstanbul ǅ ß ẞ Ǆ",
        "x" * 101 + " " + "y" * 100,  # too long for one word, and just short enough
        "unaffable antidisestablishmentarianism",
        "e\u0301 \u00e9 \u212b \u00c5",  # composed and decomposed accents
        "a\x00b\ufffdc\x07d\u200be\u2028f",  # dropped, and whitespace
        " ".join(["token"] * 400),  # truncated to 254 words between [CLS] and [SEP]
    ]
    assert differing(pair, texts + special) == []
    assert len(pair[1].ids(special[-1])) == MAX_LENGTH


def test_it_treats_every_character_as_tokenizers_does(pair):
    def texts(low: int, high: int) -> list[str]:
        chars = (chr(code) for code in range(low, high) if not 0xD800 <= code <= 0xDFFF)
        return [f"a{char}b {char}{char} {char}." for char in chars]

    # Latin, Greek, Cyrillic, Hebrew …; general punctuation; CJK, kana and
    # Hangul; the compatibility ideographs, half- and full-width forms; emoji.
    for low, high in [
        (0, 0x600),
        (0x2000, 0x2070),
        (0x3000, 0xA000),
        (0xAC00, 0xD7A4),
        (0xF900, 0x10000),
        (0x1F000, 0x1FB00),
    ]:
        assert differing(pair, texts(low, high)) == [], hex(low)
    # tokenizers' tables of marks and punctuation predate the Unicode that
    # Python knows: characters added since (about 1 % here) are letters to it.
    newer = differing(pair, texts(0x600, 0x3000))
    assert len(newer) < 0.02 * (0x3000 - 0x600)
    assert {unicodedata.category(text[1])[0] for text in newer} <= {"M", "P", "C", "S"}


def test_it_pads_a_batch_to_its_longest_text(pair):
    reference, ours = pair
    texts = ["a short one", "", "a somewhat longer text, with punctuation!"]
    batch = ours.encode_batch(texts)
    width = max(len(reference.encode(text).ids) for text in texts)
    assert batch["input_ids"].shape == (3, width)
    for row, text in enumerate(texts):
        ids = reference.encode(text).ids
        assert batch["input_ids"][row, : len(ids)].tolist() == ids
        assert batch["attention_mask"][row].tolist() == [1] * len(ids) + [0] * (width - len(ids))
        assert set(batch["input_ids"][row, len(ids) :].tolist()) <= {0}
    assert not batch["token_type_ids"].any()


def test_it_refuses_a_tokenizer_that_is_not_bert_wordpiece(tmp_path):
    spec = json.loads((default_local_model_path() / "tokenizer.json").read_text())
    spec["model"]["type"] = "BPE"
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(TokenizerUnsupported, match="BPE"):
        WordPieceTokenizer.from_file(path, max_length=MAX_LENGTH)
