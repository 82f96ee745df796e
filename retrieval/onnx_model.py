"""The local embedding model under ONNX Runtime, built from its weights without PyTorch.

Nothing is downloaded and nothing imports torch: the sentence-transformers
folder on disk (all-MiniLM-L6-v2's by default) is read as it is —
``config.json`` for the shape, ``model.safetensors`` with numpy (an 8-byte
little-endian header length, a JSON header, then the raw tensors) — and
``build_graph`` writes the whole model as one ONNX graph: BERT's embeddings
and encoder layers, mean pooling over the attention mask and, if the folder
has a Normalize module, L2 normalisation.
The graph is built once into ``export_dir`` (under ``TIMOTHY_DATA_DIR``),
named after the weights and ``GRAPH_VERSION``, and renamed into place; every
later start, in every process, loads the file. Texts are tokenised from the
folder's ``tokenizer.json`` by retrieval/wordpiece.py, and the graph is
serialised by retrieval/onnx_proto.py: the run time needs onnxruntime and
numpy, nothing else.

With precision ``int8`` (the service's default, TIMOTHY_EMBEDDING_PRECISION)
the linear layers are ONNX Runtime's MatMulNBits over 8-bit weights in
blocks of ``INT8_BLOCK_SIZE`` inputs, each with its own scale, in a file of
its own; ``float32`` keeps the weights as the folder has them.

Only this shape is built — a BERT encoder (absolute positions, GELU) in
safetensors, mean pooling, optionally normalised; anything else raises
``OnnxModelUnsupported``. tests/embeddings/test_graph.py checks the graph's
vectors against sentence-transformers' own, stored in tests/embeddings/data/.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import math
import os
import platform
import re
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from retrieval import onnx_proto
from retrieval.names import EMBEDDING_PRECISIONS
from retrieval.wordpiece import TokenizerUnsupported, WordPieceTokenizer

logger = logging.getLogger(__name__)

# Part of the cached graph's name: a change to build_graph changes it, so that a
# graph built by an earlier version (or exported with torch.onnx, as before)
# is never loaded, and is deleted once the new one is in place.
GRAPH_VERSION = "bert-numpy-1"
ONNX_OPSET = 17
ONNX_IR_VERSION = 8  # the IR that opset 17 came with
# ONNX Runtime's own operators (MatMulNBits), for the int8 graph.
ORT_DOMAIN = "com.microsoft"
ORT_DOMAIN_VERSION = 1
# The int8 graph (TIMOTHY_EMBEDDING_PRECISION=int8) keeps each linear layer's
# weights as 8-bit integers with one float scale per block of this many
# inputs, and runs the product in int8 (MatMulNBits' accuracy_level 4: the
# activations are quantised per block as well). On the dev sets' texts its
# vectors lie within cosine 0.9994 of the float32 graph's (0.9998 on average);
# a query of 8 tokens embeds in 1.0–1.3 ms on one thread against 2.7: a run
# reads 13 MB of the linear layers' weights rather than 42 (docs/embeddings.md).
INT8_BLOCK_SIZE = 16
INT8_ACCURACY_LEVEL = 4
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "sentence_embedding"
# Texts the freshly built graph must embed into finite vectors of the right
# size (and unit length when normalised) before it is renamed into place.
PROBES = ("Prefers an aisle seat on long-haul flights.", "?")

# A bulk job (reembed) runs one batch per core, each on one thread, rather than
# each batch on every core: 169 against 152 texts a second on this 2-core
# machine (bench_embed, docs/benchmarks.md). Small batches fit one core's
# caches best there (two at once of 64 texts: 123 a second).
BULK_BATCH_TEXTS = 16
# A run of the graph costs about what this many more tokens in each of its
# texts cost: one thread here, 2.4 ms a run (reading the weights) and 0.29 ms
# a token, so one 8-token query 4.6 ms, two 6.9, a query padded to a 38-token
# memory's width beside it 23 against 18 ms for the two apart (plan_batches).
PADDING_TOKENS_PER_RUN = 8

_SAFETENSORS_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",  # widened to float32 by hand below
    "I64": "<i8",
    "I32": "<i4",
}


class OnnxModelUnsupported(Exception):
    """This model (or this installation) cannot run under ONNX Runtime."""


def int8_kernels_available() -> bool:
    """Whether ONNX Runtime has integer kernels for the int8 graph's products on
    this CPU: AVX2 on x86-64, NEON on 64-bit ARM. Without them MatMulNBits
    dequantises its weights to float on every run, several times slower than
    the float32 graph. Unknown (another CPU, or numpy cannot say): True."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:
        return True
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return bool(features.get("AVX2"))
    if machine in ("aarch64", "arm64"):
        return bool(features.get("ASIMD") or features.get("NEON"))
    return True


def check_supported(model_path: Path) -> dict:
    """The folder's layout if the graph can be built for it; else ``OnnxModelUnsupported``.

    Reads only small files (the configs, the safetensors header): cheap enough
    for start-up.
    """
    layout = _layout(model_path)
    config = _bert_config(model_path)
    _weight_prefix(_safetensors_header(model_path / "model.safetensors"), config)
    _tokenizer(model_path, layout)
    return layout


def _tokenizer(model_path: Path, layout: dict) -> WordPieceTokenizer:
    try:
        return WordPieceTokenizer.from_file(
            model_path / "tokenizer.json", max_length=layout["max_seq_length"]
        )
    except TokenizerUnsupported as error:
        raise OnnxModelUnsupported(f"the tokenizer is not BERT's WordPiece: {error}")


def load_onnx_model(
    model_path: Path,
    *,
    export_dir: Path | None,
    threads: int,
    batch_size: int,
    bulk: bool = False,
    precision: str = "float32",
) -> OnnxModel:
    layout = check_supported(model_path)
    if precision not in EMBEDDING_PRECISIONS:
        raise OnnxModelUnsupported(f"precision {precision!r} is not one of {EMBEDDING_PRECISIONS}")
    layout = {**layout, "precision": precision}
    try:
        import onnxruntime  # noqa: F401
    except ImportError as error:
        raise OnnxModelUnsupported(f"onnxruntime is not installed ({error})")
    if export_dir is None:
        raise OnnxModelUnsupported("no folder to keep the model's graph in")
    if bulk:
        shape = {
            "threads": 1,
            "batch_size": min(batch_size, BULK_BATCH_TEXTS),
            "parallel_batches": threads,
        }
    else:
        shape = {"threads": threads, "batch_size": batch_size}
    target = graph_path(model_path, export_dir, precision)
    if not target.exists():
        export_dir.mkdir(parents=True, exist_ok=True)
        # One process builds; the others wait for it and load its file.
        with open(export_dir / ".export.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.exists():
                model = _build(model_path, target, layout, shape)
                _remove_stale_graphs(target)
                return model
    return OnnxModel(model_path, target, layout, **shape)


def graph_path(model_path: Path, export_dir: Path, precision: str = "float32") -> Path:
    """Where the graph of this model folder is kept: named after its weights,
    GRAPH_VERSION and, unless float32, its precision."""
    name = model_path.name or "model"
    if precision != "float32":
        name = f"{name}-{precision}"
    return export_dir / f"{name}-{_fingerprint(model_path, precision)}.onnx"


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

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            str(onnx_file), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [item.name for item in self.session.get_inputs()]
        self.tokenizer = _tokenizer(model_path, layout)
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
        rows = [self.tokenizer.ids(text) for text in texts]
        vectors = np.empty((len(texts), self.dimensions), dtype=np.float32)
        chunks = plan_batches([len(row) for row in rows], self.batch_size)

        def encode_chunk(chunk: list[int]) -> None:
            vectors[chunk] = self._encode_batch([rows[index] for index in chunk])

        if self._pool is None or len(chunks) == 1:
            for chunk in chunks:
                encode_chunk(chunk)
        else:
            list(self._pool.map(encode_chunk, chunks))
        return vectors

    def _encode_batch(self, rows: list[list[int]]) -> np.ndarray:
        columns = self.tokenizer.pad(rows)
        return self.session.run([OUTPUT], {name: columns[name] for name in self.inputs})[0]


def plan_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """The texts' indexes in the batches that embed them, longest texts first.

    Every text in a batch is padded to the batch's longest, and a padding
    token costs as much as a real one, so a text joins the batch before it
    only while that batch has room and its longest text is at most
    ``PADDING_TOKENS_PER_RUN`` tokens longer; otherwise it starts a batch.
    A query waiting beside a new memory's long text is embedded on its own.
    """
    order = sorted(range(len(lengths)), key=lambda index: -lengths[index])
    batches: list[list[int]] = []
    for index in order:
        batch = batches[-1] if batches else None
        if (
            batch is not None
            and len(batch) < batch_size
            and lengths[batch[0]] - lengths[index] <= PADDING_TOKENS_PER_RUN
        ):
            batch.append(index)
        else:
            batches.append([index])
    return batches


# --- the model folder --------------------------------------------------------


def _layout(model_path: Path) -> dict:
    """What the folder's modules are, if they are a shape this module can build."""
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
        if not (model_path / "tokenizer.json").exists():
            raise OnnxModelUnsupported("the folder has no tokenizer.json")
        return {
            "normalize": kinds[-1] == "Normalize",
            "dimensions": int(pooling["word_embedding_dimension"]),
            "max_seq_length": max_seq_length,
        }
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
        raise OnnxModelUnsupported(f"cannot read the model folder's layout: {error}")


def _bert_config(model_path: Path) -> dict:
    """The transformer's config.json, if it is a BERT encoder build_graph can write."""
    try:
        config = json.loads((model_path / "config.json").read_text())
    except (OSError, ValueError) as error:
        raise OnnxModelUnsupported(f"cannot read the transformer's config.json: {error}")
    if config.get("model_type") != "bert":
        raise OnnxModelUnsupported(f"the transformer is {config.get('model_type')!r}, not BERT")
    if config.get("hidden_act", "gelu") != "gelu":
        raise OnnxModelUnsupported(f"the activation is {config['hidden_act']!r}, not GELU")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise OnnxModelUnsupported(
            f"the position embeddings are {config['position_embedding_type']!r}, not absolute"
        )
    try:
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        int(config["num_hidden_layers"])
    except (KeyError, TypeError, ValueError) as error:
        raise OnnxModelUnsupported(f"the transformer's config.json lacks {error}")
    if hidden % heads:
        raise OnnxModelUnsupported(f"{heads} heads do not divide a hidden size of {hidden}")
    return config


def _safetensors_header(path: Path) -> dict:
    """The JSON header of a safetensors file: each tensor's dtype, shape and byte range."""
    try:
        with open(path, "rb") as file:
            (length,) = struct.unpack("<Q", file.read(8))
            header = json.loads(file.read(length))
    except FileNotFoundError:
        raise OnnxModelUnsupported(f"the folder has no model.safetensors ({path})")
    except (OSError, ValueError, struct.error) as error:
        raise OnnxModelUnsupported(f"cannot read {path}: {error}")
    header.pop("__metadata__", None)
    header["__data_start__"] = 8 + length
    return header


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a numpy array (float tensors as float32)."""
    header = _safetensors_header(path)
    start = header.pop("__data_start__")
    data = np.memmap(path, dtype=np.uint8, mode="r")
    tensors = {}
    for name, entry in header.items():
        kind = _SAFETENSORS_DTYPES.get(entry["dtype"])
        if kind is None:
            raise OnnxModelUnsupported(f"tensor {name} is {entry['dtype']}")
        begin, end = entry["data_offsets"]
        array = data[start + begin : start + end].view(kind).reshape(entry["shape"])
        if entry["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        elif array.dtype.kind == "f":
            array = array.astype(np.float32, copy=False)  # float32 stays a view of the file
        else:
            array = np.array(array)
        tensors[name] = array
    return tensors


def _weight_prefix(header: dict, config: dict) -> str:
    """How the file names BERT's tensors: bare (``embeddings…``) or under ``bert.``."""
    for prefix in ("", "bert."):
        needed = [f"{prefix}{name}" for name in _weight_names(int(config["num_hidden_layers"]))]
        if all(name in header for name in needed):
            return prefix
    raise OnnxModelUnsupported("model.safetensors does not hold a BERT encoder's tensors")


def _weight_names(layers: int) -> list[str]:
    names = [
        "embeddings.word_embeddings.weight",
        "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight",
        "embeddings.LayerNorm.weight",
        "embeddings.LayerNorm.bias",
    ]
    for layer in range(layers):
        for part in (
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "attention.output.LayerNorm",
            "intermediate.dense",
            "output.dense",
            "output.LayerNorm",
        ):
            names += [f"encoder.layer.{layer}.{part}.weight", f"encoder.layer.{layer}.{part}.bias"]
    return names


def _fingerprint(model_path: Path, precision: str = "float32") -> str:
    """Names the graph after the weights and the builder: new either, new graph."""
    version = GRAPH_VERSION if precision == "float32" else f"{GRAPH_VERSION}:{precision}"
    digest = hashlib.sha256(f"{version}:{model_path.resolve()}".encode())
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        path = model_path / name
        if path.exists():
            stat = path.stat()
            digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def _remove_stale_graphs(target: Path) -> None:
    """Delete earlier graphs of a folder of this name (older weights or builder)."""
    prefix = target.name[: -len("-0123456789abcdef.onnx")]
    pattern = re.compile(re.escape(prefix) + r"-[0-9a-f]{16}\.onnx")
    for path in target.parent.iterdir():
        if path != target and pattern.fullmatch(path.name):
            path.unlink(missing_ok=True)
            logger.info("Removed the stale model graph %s", path)


# --- the graph ---------------------------------------------------------------


class _Nodes:
    """Collects nodes and initialisers; each op's output gets a fresh name."""

    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.initializers: list[bytes] = []
        self._count = 0

    def constant(self, name: str, value) -> str:
        self.initializers.append(onnx_proto.from_array(np.asarray(value), name))
        return name

    def op(
        self,
        op_type: str,
        *inputs: str,
        output: str | None = None,
        domain: str = "",
        **attributes,
    ) -> str:
        self._count += 1
        output = output or f"{op_type}_{self._count}"
        self.nodes.append(
            onnx_proto.make_node(
                op_type,
                list(inputs),
                [output],
                name=f"{op_type}_{self._count}",
                domain=domain,
                **attributes,
            )
        )
        return output


def quantize_blocks(weight: np.ndarray, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """A torch Linear weight (out × in) as MatMulNBits wants it at 8 bits:
    unsigned bytes (out × in/block × block, zero at 128) and one float32 scale
    per block (out · in/block), the block's largest magnitude over 127."""
    outputs, inputs = weight.shape
    blocks = weight.reshape(outputs, inputs // block_size, block_size).astype(np.float32)
    largest = np.abs(blocks).max(axis=2)
    scales = np.where(largest > 0, largest / 127, 1).astype(np.float32)
    quantized = np.clip(np.rint(blocks / scales[..., None]), -127, 127) + 128
    return quantized.astype(np.uint8), scales.reshape(-1)


def build_graph(
    weights: dict[str, np.ndarray],
    config: dict,
    *,
    normalize: bool,
    prefix: str = "",
    precision: str = "float32",
) -> bytes:
    """The model as a serialised ONNX ModelProto: token ids in, one sentence vector per text out.

    The same arithmetic as transformers' BertModel in inference, then
    sentence-transformers' mean Pooling and Normalize: inputs ``input_ids``,
    ``attention_mask``, ``token_type_ids`` (int64, batch × tokens), output
    ``sentence_embedding`` (float32, batch × hidden size). With ``precision``
    ``int8`` the linear layers (whose inputs divide into ``INT8_BLOCK_SIZE``
    blocks) are ONNX Runtime's MatMulNBits over 8-bit weights; everything
    else is as in float32.
    """
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    epsilon = float(config.get("layer_norm_eps", 1e-12))
    head_size = hidden // heads
    g = _Nodes()

    def weight(name: str) -> np.ndarray:
        return weights[prefix + name].astype(np.float32, copy=False)

    def linear(x: str, name: str) -> str:
        w = weight(f"{name}.weight")
        b = g.constant(f"{name}.bias", weight(f"{name}.bias"))
        outputs, inputs = w.shape
        if precision == "int8" and inputs % INT8_BLOCK_SIZE == 0:
            quantized, scales = quantize_blocks(w, INT8_BLOCK_SIZE)
            product = g.op(
                "MatMulNBits",
                x,
                g.constant(f"{name}.weight_q", quantized),
                g.constant(f"{name}.weight_scales", scales),
                domain=ORT_DOMAIN,
                K=inputs,
                N=outputs,
                bits=8,
                block_size=INT8_BLOCK_SIZE,
                accuracy_level=INT8_ACCURACY_LEVEL,
            )
            return g.op("Add", product, b)
        # torch's Linear keeps its weight as out × in; MatMul wants in × out.
        return g.op(
            "Add", g.op("MatMul", x, g.constant(f"{name}.weight_t", np.ascontiguousarray(w.T))), b
        )

    def layer_norm(x: str, name: str) -> str:
        gamma = g.constant(f"{name}.weight", weight(f"{name}.weight"))
        beta = g.constant(f"{name}.bias", weight(f"{name}.bias"))
        return g.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=epsilon)

    one = g.constant("one", np.array(1.0, dtype=np.float32))
    half = g.constant("half", np.array(0.5, dtype=np.float32))
    sqrt2 = g.constant("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    minimum = g.constant("float_min", np.array(np.finfo(np.float32).min, dtype=np.float32))
    scale = g.constant("attention_scale", np.array(1 / math.sqrt(head_size), dtype=np.float32))
    split_heads = g.constant("split_heads", np.array([0, 0, heads, head_size], dtype=np.int64))
    merge_heads = g.constant("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    axis_1 = g.constant("axis_1", np.array([1], dtype=np.int64))
    axis_2 = g.constant("axis_2", np.array([2], dtype=np.int64))
    axes_1_2 = g.constant("axes_1_2", np.array([1, 2], dtype=np.int64))
    zero_i = g.constant("zero_i", np.array(0, dtype=np.int64))
    one_i = g.constant("one_i", np.array(1, dtype=np.int64))
    tiny = g.constant("count_floor", np.array(1e-9, dtype=np.float32))
    norm_floor = g.constant("norm_floor", np.array(1e-12, dtype=np.float32))

    # Embeddings: word + token type + position (0 … tokens − 1), then LayerNorm.
    words = g.op(
        "Gather",
        g.constant("word_embeddings", weight("embeddings.word_embeddings.weight")),
        "input_ids",
    )
    types = g.op(
        "Gather",
        g.constant("token_type_embeddings", weight("embeddings.token_type_embeddings.weight")),
        "token_type_ids",
    )
    tokens = g.op("Gather", g.op("Shape", "input_ids"), one_i, axis=0)
    positions = g.op("Range", zero_i, tokens, one_i)
    placed = g.op(
        "Gather",
        g.constant("position_embeddings", weight("embeddings.position_embeddings.weight")),
        positions,
    )
    x = layer_norm(g.op("Add", g.op("Add", words, types), placed), "embeddings.LayerNorm")

    # Padding gets the lowest float added to its attention scores: batch × 1 × 1 × tokens.
    mask = g.op("Cast", "attention_mask", to=onnx_proto.FLOAT)
    mask_bias = g.op("Unsqueeze", g.op("Mul", g.op("Sub", one, mask), minimum), axes_1_2)

    for layer in range(layers):
        name = f"encoder.layer.{layer}"

        def heads_of(projection: str, perm: list[int]) -> str:
            return g.op("Transpose", g.op("Reshape", projection, split_heads), perm=perm)

        query = heads_of(linear(x, f"{name}.attention.self.query"), [0, 2, 1, 3])
        key = heads_of(linear(x, f"{name}.attention.self.key"), [0, 2, 3, 1])
        value = heads_of(linear(x, f"{name}.attention.self.value"), [0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", query, key), scale), mask_bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), value)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge_heads)
        attended = linear(context, f"{name}.attention.output.dense")
        x = layer_norm(g.op("Add", attended, x), f"{name}.attention.output.LayerNorm")
        # GELU as BERT has it: x · ½ · (1 + erf(x / √2)).
        inner = linear(x, f"{name}.intermediate.dense")
        erf = g.op("Add", g.op("Erf", g.op("Div", inner, sqrt2)), one)
        activated = g.op("Mul", g.op("Mul", inner, erf), half)
        out = linear(activated, f"{name}.output.dense")
        x = layer_norm(g.op("Add", out, x), f"{name}.output.LayerNorm")

    # Mean pooling over the tokens the mask keeps.
    token_mask = g.op("Unsqueeze", mask, axis_2)
    summed = g.op("ReduceSum", g.op("Mul", x, token_mask), axis_1, keepdims=0)
    counts = g.op("Max", g.op("ReduceSum", token_mask, axis_1, keepdims=0), tiny)
    if normalize:
        pooled = g.op("Div", summed, counts)
        norms = g.op("Max", g.op("ReduceL2", pooled, axes=[1], keepdims=1), norm_floor)
        g.op("Div", pooled, norms, output=OUTPUT)
    else:
        g.op("Div", summed, counts, output=OUTPUT)

    graph = onnx_proto.make_graph(
        g.nodes,
        "sentence_embedding",
        [
            onnx_proto.make_tensor_value_info(name, onnx_proto.INT64, ["batch", "tokens"])
            for name in INPUTS
        ],
        [onnx_proto.make_tensor_value_info(OUTPUT, onnx_proto.FLOAT, ["batch", hidden])],
        initializer=g.initializers,
    )
    return onnx_proto.make_model(
        graph,
        ir_version=ONNX_IR_VERSION,
        opset=ONNX_OPSET,
        producer_name="timothy-memory",
        producer_version=GRAPH_VERSION,
        domains={ORT_DOMAIN: ORT_DOMAIN_VERSION} if precision == "int8" else None,
    )


def _build(model_path: Path, target: Path, layout: dict, shape: dict) -> OnnxModel:
    """Build the graph into ``target``; the session that checked it is the one returned."""
    started = time.monotonic()
    config = _bert_config(model_path)
    weights_path = model_path / "model.safetensors"
    prefix = _weight_prefix(_safetensors_header(weights_path), config)
    partial = target.with_name(target.name + f".{os.getpid()}.partial")
    try:
        graph = build_graph(
            read_safetensors(weights_path),
            config,
            normalize=layout["normalize"],
            prefix=prefix,
            precision=layout["precision"],
        )
        partial.write_bytes(graph)
        del graph
        built = OnnxModel(model_path, partial, layout, **shape)
        vectors = built.encode(list(PROBES))
        norms = np.linalg.norm(vectors, axis=1)
        if vectors.shape != (len(PROBES), layout["dimensions"]) or not np.isfinite(vectors).all():
            raise OnnxModelUnsupported(f"the built graph gives unusable vectors {vectors.shape}")
        if layout["normalize"] and not np.allclose(norms, 1, atol=1e-4):
            raise OnnxModelUnsupported(f"the built graph's vectors are not unit length: {norms}")
        partial.replace(target)
        logger.info(
            "Built the ONNX graph of %s at %s in %.1f s",
            model_path,
            target,
            time.monotonic() - started,
        )
        return built
    except OnnxModelUnsupported:
        raise
    except Exception as error:
        raise OnnxModelUnsupported(f"building the graph failed: {error}")
    finally:
        partial.unlink(missing_ok=True)
