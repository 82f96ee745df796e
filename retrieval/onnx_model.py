"""The local embedding model under ONNX Runtime: the same weights, about twice as fast per query.

Nothing is downloaded: the sentence-transformers folder on disk is exported
once with ``torch.onnx`` into ``export_dir`` (under ``TIMOTHY_DATA_DIR``),
checked against the sentence-transformers vectors on a few probe sentences,
and renamed into place; every later start, in every process, loads the file.
Only the common shape is exported — a transformer, mean pooling, optionally
normalised (all-MiniLM-L6-v2's); anything else raises ``OnnxModelUnsupported``
and the caller runs the model with torch.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

# Vectors from the exported model must match sentence-transformers' to this
# cosine (they match to about 1e-7 for all-MiniLM-L6-v2).
MATCH_MIN_COSINE = 1 - 1e-3
ONNX_OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
PROBES = (
    "Prefers an aisle seat on long-haul flights.",
    "Her sister lives in Lisbon and works as an architect.",
    "?",
    "A longer memory that goes on: " + "the garden, the bees, the honey harvest, " * 40,
)


# A bulk job (reembed) runs one batch per core, each on one thread, rather than
# each batch on every core: 158 against 120 texts a second on this 2-core
# machine (bench_embed, docs/benchmarks.md). Small batches fit one core's
# caches best there (two at once of 64 texts: 123 a second).
BULK_BATCH_TEXTS = 16


class OnnxModelUnsupported(Exception):
    """This model (or this installation) cannot run under ONNX Runtime."""


def load_onnx_model(
    model_path: Path,
    *,
    export_dir: Path | None,
    threads: int,
    batch_size: int,
    bulk: bool = False,
) -> OnnxModel:
    layout = _layout(model_path)
    try:
        import onnxruntime  # noqa: F401
        from tokenizers import Tokenizer  # noqa: F401
    except ImportError as error:
        raise OnnxModelUnsupported(f"onnxruntime is not installed ({error})")
    if export_dir is None:
        raise OnnxModelUnsupported("no folder to keep the exported model in")
    target = export_dir / f"{model_path.name or 'model'}-{_fingerprint(model_path)}.onnx"
    if not target.exists():
        export_dir.mkdir(parents=True, exist_ok=True)
        # One process exports; the others wait for it and load its file.
        with open(export_dir / ".export.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.exists():
                _export(model_path, target, layout, batch_size)
    if bulk:
        return OnnxModel(
            model_path,
            target,
            layout,
            threads=1,
            batch_size=min(batch_size, BULK_BATCH_TEXTS),
            parallel_batches=threads,
        )
    return OnnxModel(model_path, target, layout, threads=threads, batch_size=batch_size)


class OnnxModel:
    runtime = "onnx"

    def __init__(
        self,
        model_path: Path,
        onnx_file: Path,
        layout: dict,
        *,
        threads: int,
        batch_size: int,
        parallel_batches: int = 1,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            str(onnx_file), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [item.name for item in self.session.get_inputs()]
        self.tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=layout["max_seq_length"])
        pad_token = layout["pad_token"]
        self.tokenizer.enable_padding(
            pad_id=self.tokenizer.token_to_id(pad_token) or 0, pad_token=pad_token
        )
        self.normalize = layout["normalize"]
        self.dimensions = layout["dimensions"]
        self.batch_size = batch_size
        # ONNX Runtime lets go of the GIL while it runs, and one session serves
        # concurrent runs: each of these threads keeps one core busy.
        self.parallel_batches = max(1, parallel_batches)
        self._pool = (
            ThreadPoolExecutor(self.parallel_batches, thread_name_prefix="onnx-batch")
            if self.parallel_batches > 1
            else None
        )

    def encode(self, texts: list[str]) -> np.ndarray:
        # Like sentence-transformers: batches of similar lengths pad least.
        order = sorted(range(len(texts)), key=lambda index: -len(texts[index]))
        vectors = np.empty((len(texts), self.dimensions), dtype=np.float32)
        chunks = [
            order[start : start + self.batch_size]
            for start in range(0, len(order), self.batch_size)
        ]

        def encode_chunk(chunk: list[int]) -> None:
            vectors[chunk] = self._encode_batch([texts[index] for index in chunk])

        if self._pool is None or len(chunks) == 1:
            for chunk in chunks:
                encode_chunk(chunk)
        else:
            list(self._pool.map(encode_chunk, chunks))
        return vectors

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        columns = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
        }
        feeds = {name: np.asarray(columns[name], dtype=np.int64) for name in self.inputs}
        hidden = self.session.run(None, feeds)[0]
        mask = np.asarray(columns["attention_mask"], dtype=np.float32)[..., None]
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        if self.normalize:
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled


def _layout(model_path: Path) -> dict:
    """What the folder's modules are, if they are a shape this module can export."""
    try:
        modules = json.loads((model_path / "modules.json").read_text())
        kinds = [module.get("type", "").rsplit(".", 1)[-1] for module in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            raise OnnxModelUnsupported(f"modules {kinds} are not transformer + mean pooling")
        if modules[0].get("path", ""):
            raise OnnxModelUnsupported("the transformer is not at the folder's top")
        pooling = json.loads((model_path / modules[1]["path"] / "config.json").read_text())
        modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
        if modes != ["pooling_mode_mean_tokens"]:
            raise OnnxModelUnsupported(f"pooling {modes} is not mean pooling")
        sentence_config = model_path / "sentence_bert_config.json"
        max_seq_length = 512
        if sentence_config.exists():
            max_seq_length = int(json.loads(sentence_config.read_text())["max_seq_length"])
        special = {}
        if (model_path / "special_tokens_map.json").exists():
            special = json.loads((model_path / "special_tokens_map.json").read_text())
        pad = special.get("pad_token", "[PAD]")
        if not (model_path / "tokenizer.json").exists():
            raise OnnxModelUnsupported("the folder has no tokenizer.json")
        return {
            "normalize": kinds[-1] == "Normalize",
            "dimensions": int(pooling["word_embedding_dimension"]),
            "max_seq_length": max_seq_length,
            "pad_token": pad["content"] if isinstance(pad, dict) else pad,
        }
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
        raise OnnxModelUnsupported(f"cannot read the model folder's layout: {error}")


def _fingerprint(model_path: Path) -> str:
    """Names the export after the weights it came from: new weights, new export."""
    digest = hashlib.sha256(str(model_path.resolve()).encode())
    for name in ("config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json"):
        path = model_path / name
        if path.exists():
            stat = path.stat()
            digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def _export(model_path: Path, target: Path, layout: dict, batch_size: int) -> None:
    try:
        import onnx  # noqa: F401  (torch.onnx writes through it)
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise OnnxModelUnsupported(f"cannot export without torch and onnx ({error})")

    model = SentenceTransformer(str(model_path), device="cpu")
    transformer = model[0].auto_model.eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    sample = model.tokenizer(list(PROBES[:2]), padding=True, return_tensors="pt")
    partial = target.with_name(target.name + f".{os.getpid()}.partial")
    try:
        # The tracer warns about Python-side branches that are fixed for inference.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHiddenState(),
                tuple(sample[name] for name in INPUTS),
                str(partial),
                input_names=list(INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in INPUTS}
                | {"last_hidden_state": {0: "batch", 1: "tokens"}},
                opset_version=ONNX_OPSET,
                dynamo=False,
            )
        exported = OnnxModel(model_path, partial, layout, threads=1, batch_size=batch_size)
        expected = model.encode(list(PROBES), convert_to_numpy=True, show_progress_bar=False)
        got = exported.encode(list(PROBES))
        cosines = (expected * got).sum(axis=1) / (
            np.linalg.norm(expected, axis=1) * np.linalg.norm(got, axis=1)
        )
        if float(cosines.min()) < MATCH_MIN_COSINE:
            raise OnnxModelUnsupported(
                f"the exported model's vectors differ (cosine {cosines.min():.6f})"
            )
        partial.replace(target)
        logger.info("Exported %s to ONNX at %s", model_path, target)
    except OnnxModelUnsupported:
        raise
    except Exception as error:
        raise OnnxModelUnsupported(f"export failed: {error}")
    finally:
        partial.unlink(missing_ok=True)
