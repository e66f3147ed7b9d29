"""all-MiniLM-L6-v2 run on onnxruntime directly, exactly as fastembed runs it, without fastembed.

fastembed pulls in Pillow, huggingface_hub, httpx, tqdm and loguru on import, which a server would
carry in its RSS and wait for at every model load, for three steps kms can do itself. This is those
steps, to the same numbers (checked against fastembed in tests/unit/test_embeddings.py):
its tokenizer settings (truncation at ``model_max_length`` of tokenizer_config.json, padding
to the batch's longest with the pad token), its session options (every graph optimisation,
``threads`` intra- and inter-op; no CPU arena, which kept the freed activations), mean
pooling over the attention mask in float64, then the L2 norm. fastembed stays the downloader
(``download_model``) and the benchmark's baseline.

One tokenizer without padding or truncation serves both token counting and embedding: the
batch is cut and padded here, as the tokenizer would have, so no second tokenizer is held.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _max_context(config: dict[str, Any]) -> int:
    """fastembed's rule: the stricter of ``model_max_length`` and ``max_length`` (1e30 and 0 mean unset)."""
    found = [
        v
        for v in (config.get("model_max_length"), config.get("max_length"))
        if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1 << 62
    ]
    if not found:
        raise ValueError("tokenizer_config.json gives no model_max_length")
    return min(found)


class MiniLM:
    """The ONNX session and the tokenizer of one model dir; thread-safe for inference."""

    def __init__(self, model_dir: str | Path, threads: int) -> None:
        # deferred: onnxruntime and tokenizers only when the model is loaded
        import onnxruntime as ort
        from tokenizers import Tokenizer

        d = Path(model_dir)
        config = json.loads((d / "tokenizer_config.json").read_text(encoding="utf-8"))
        specials = json.loads((d / "special_tokens_map.json").read_text(encoding="utf-8"))
        self.max_len = _max_context(config)
        tokenizer = Tokenizer.from_file(str(d / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self.tokenizer = tokenizer
        pad = specials.get("pad_token") or config.get("pad_token")
        pad_token = pad["content"] if isinstance(pad, dict) else pad
        pad_id = tokenizer.token_to_id(pad_token) if pad_token else None
        if pad_id is None:
            raise ValueError(f"no id for the pad token {pad_token!r}")
        self.pad_id = int(pad_id)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        options.enable_cpu_mem_arena = False
        self.session = ort.InferenceSession(
            str(d / "model.onnx"), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}

    def count(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text, without the special tokens (what the window is spent on)."""
        return [len(e.ids) for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, DIM)`` float32, L2-normalised, in the input order; one ONNX run for the batch."""
        rows = []
        for e in self.tokenizer.encode_batch(list(texts)):
            ids = e.ids
            if len(ids) > self.max_len:  # as the tokenizer truncates: the content, keeping [CLS] … [SEP]
                ids = ids[: self.max_len - 1] + ids[-1:]
            rows.append(ids)
        width = max(len(r) for r in rows)
        input_ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            input_ids[i, : len(r)] = r
            mask[i, : len(r)] = 1
        feeds = {"input_ids": input_ids}
        if "attention_mask" in self.inputs:
            feeds["attention_mask"] = mask
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        out = self.session.run(None, feeds)[0]
        summed = np.sum(out, axis=1, where=mask[:, :, None].astype(bool), dtype=np.float64)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norm = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norm).astype(np.float32)
