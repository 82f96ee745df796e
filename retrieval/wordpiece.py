"""BERT's WordPiece tokenizer in plain Python, read from a model folder's ``tokenizer.json``.

The local embedding model needs token ids for ONNX Runtime. Hugging Face's
``tokenizers`` would give them too, but brings 40 MB of packages (its hub
client among them) for what is, for a BERT model, a short recipe — the steps
of ``tokenizer.json``, and only these, are supported:

1. split off the added tokens (``[CLS]``, ``[MASK]`` … written in the text);
2. ``BertNormalizer``: drop control characters, whitespace to spaces, spaces
   around CJK ideographs, accents stripped, lower case;
3. ``BertPreTokenizer``: split on whitespace, each punctuation mark a word;
4. ``WordPiece``: the longest vocabulary entry first, ``##`` for the rest of
   a word, ``[UNK]`` for a word that cannot be spelled or is too long;
5. truncate to ``max_length`` with room for ``[CLS] … [SEP]``.

tests/embeddings/test_wordpiece.py checks it against ``tokenizers`` itself.
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache
from pathlib import Path

import numpy as np


class TokenizerUnsupported(Exception):
    """The tokenizer.json describes something other than BERT's WordPiece."""


# Unicode's White_Space property (what Rust's char::is_whitespace tests).
_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# The CJK ideograph blocks BERT puts spaces around (as tokenizers' BertNormalizer has them).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_control(char: str) -> bool:
    return char not in "\t\n\r" and unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs")


class WordPieceTokenizer:
    def __init__(self, spec: dict, *, max_length: int) -> None:
        normalizer = spec.get("normalizer") or {}
        if normalizer.get("type") != "BertNormalizer":
            raise TokenizerUnsupported(f"normalizer {normalizer.get('type')!r}")
        pre_tokenizer = spec.get("pre_tokenizer") or {}
        if pre_tokenizer.get("type") != "BertPreTokenizer":
            raise TokenizerUnsupported(f"pre-tokenizer {pre_tokenizer.get('type')!r}")
        model = spec.get("model") or {}
        if model.get("type") != "WordPiece":
            raise TokenizerUnsupported(f"model {model.get('type')!r}")
        self.clean_text = bool(normalizer.get("clean_text", True))
        self.handle_cjk = bool(normalizer.get("handle_chinese_chars", True))
        self.lowercase = bool(normalizer.get("lowercase", True))
        strip_accents = normalizer.get("strip_accents")
        self.strip_accents = self.lowercase if strip_accents is None else bool(strip_accents)
        self.vocab: dict[str, int] = model["vocab"]
        self.unk_id = self.vocab[model.get("unk_token", "[UNK]")]
        self.prefix = model.get("continuing_subword_prefix", "##")
        self.max_word_chars = int(model.get("max_input_chars_per_word", 100))
        self.cls_id, self.sep_id = self._special_ids(spec.get("post_processor") or {})
        self.max_length = max_length
        padding = spec.get("padding") or {}
        self.pad_id = int(padding.get("pad_id", self.vocab.get("[PAD]", 0)))
        added = spec.get("added_tokens") or []
        for token in added:
            if token.get("normalized") or token.get("single_word"):
                raise TokenizerUnsupported(f"added token {token.get('content')!r}")
            if token.get("lstrip") or token.get("rstrip"):
                raise TokenizerUnsupported(f"added token {token.get('content')!r}")
        self.added = {token["content"]: int(token["id"]) for token in added}
        # Longest first: the leftmost, then longest, added token wins.
        contents = sorted(self.added, key=len, reverse=True)
        self._added_pattern = (
            re.compile("|".join(re.escape(content) for content in contents)) if contents else None
        )
        self._word_ids = lru_cache(maxsize=1 << 16)(self._wordpiece)

    @classmethod
    def from_file(cls, path: Path, *, max_length: int) -> WordPieceTokenizer:
        try:
            spec = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise TokenizerUnsupported(f"cannot read {path}: {error}")
        try:
            return cls(spec, max_length=max_length)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise TokenizerUnsupported(f"{path} is not BERT's WordPiece: {error}")

    def _special_ids(self, post_processor: dict) -> tuple[int, int]:
        kind = post_processor.get("type")
        if kind == "BertProcessing":
            return int(post_processor["cls"][1]), int(post_processor["sep"][1])
        if kind == "TemplateProcessing":
            single = post_processor["single"]
            shape = [
                "A" if "Sequence" in piece else piece["SpecialToken"]["id"] for piece in single
            ]
            if len(shape) == 3 and shape[1] == "A" and shape[0] != "A" and shape[2] != "A":
                special = post_processor["special_tokens"]
                [cls_id] = special[shape[0]]["ids"]
                [sep_id] = special[shape[2]]["ids"]
                return int(cls_id), int(sep_id)
        raise TokenizerUnsupported(f"post-processor {kind!r} is not [CLS] text [SEP]")

    # --- one text --------------------------------------------------------------

    def ids(self, text: str) -> list[int]:
        """The token ids of one text: ``[CLS]``, at most ``max_length`` − 2 tokens, ``[SEP]``."""
        tokens: list[int] = []
        start = 0
        if self._added_pattern is not None:
            for match in self._added_pattern.finditer(text):
                tokens += self._text_ids(text[start : match.start()])
                tokens.append(self.added[match.group()])
                start = match.end()
        tokens += self._text_ids(text[start:])
        return [self.cls_id, *tokens[: max(0, self.max_length - 2)], self.sep_id]

    def _text_ids(self, text: str) -> list[int]:
        ids: list[int] = []
        for word in self._words(self._normalize(text)):
            ids += self._word_ids(word)
        return ids

    def _normalize(self, text: str) -> str:
        if self.clean_text:
            text = "".join(
                " " if char in _WHITESPACE else char
                for char in text
                if char not in "\x00\ufffd" and not _is_control(char)
            )
        if self.handle_cjk:
            text = "".join(f" {char} " if _is_cjk(ord(char)) else char for char in text)
        if self.strip_accents:
            text = "".join(
                char
                for char in unicodedata.normalize("NFD", text)
                if unicodedata.category(char) != "Mn"
            )
        if self.lowercase:
            # Character by character, as tokenizers does (no final-sigma rule).
            text = "".join(char.lower() for char in text)
        return text

    @staticmethod
    def _words(text: str) -> list[str]:
        words: list[str] = []
        current: list[str] = []
        for char in text:
            if char in _WHITESPACE:
                if current:
                    words.append("".join(current))
                    current = []
            elif _is_punctuation(char):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(char)
            else:
                current.append(char)
        if current:
            words.append("".join(current))
        return words

    def _wordpiece(self, word: str) -> tuple[int, ...]:
        if len(word) > self.max_word_chars:
            return (self.unk_id,)
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    pieces.append(found)
                    break
                end -= 1
            else:
                return (self.unk_id,)
            start = end
        return tuple(pieces)

    # --- a batch ---------------------------------------------------------------

    def encode_batch(self, texts: list[str]) -> dict[str, np.ndarray]:
        """``input_ids``, ``attention_mask`` and ``token_type_ids``, padded to the longest text."""
        return self.pad([self.ids(text) for text in texts])

    def pad(self, rows: list[list[int]]) -> dict[str, np.ndarray]:
        """The model's inputs for texts already turned into ids (``ids``), padded to the longest."""
        width = max(len(row) for row in rows)
        input_ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        attention_mask = np.zeros((len(rows), width), dtype=np.int64)
        for index, row in enumerate(rows):
            input_ids[index, : len(row)] = row
            attention_mask[index, : len(row)] = 1
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
