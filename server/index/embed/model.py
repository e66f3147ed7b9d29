"""Where the embedding model lives, and the holder that loads it without ever blocking a caller.

The model (sentence-transformers/all-MiniLM-L6-v2 as ONNX, 384 dims) is a directory of five
files. It is looked for, in order: the configured dir (the ``embed.model_dir`` setting, passed in
by the caller: ``$KMS_EMBED_MODEL_DIR`` reaches it through the settings, never read here), the copy
``kms model install`` put in the kms data dir, and
fastembed's own download cache. Nothing here downloads: a missing model is a clear state
(``missing`` with a reason) and search falls back to keywords.

onnxruntime (and fastembed, the downloader) are slow and large to import, so they are imported only
when a model is actually loaded, normally in a background thread after the server started.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from server.errors import KmsError

# what can be known without numpy: the model's name, its files and where they are
from server.index.embed_pending import (
    MODEL_DIRNAME,
    MODEL_NAME,
    REQUIRED_FILES,
    fastembed_cache_dirs,
    installed_model_dir,
    locate_model,
    missing_files,
)

DIM = 384
MAX_TOKENS = 256  # the model was trained on 256-token windows; longer input is truncated
# The int8 build that scripts/fetch_model.py assembles (tests and CI use exactly this file).
PINNED_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

# Holder states.
NOT_LOADED = "not-loaded"
LOADING = "loading"
READY = "ready"
MISSING = "missing"
FAILED = "failed"
DISABLED = "disabled"


class EmbeddingStopped(Exception):
    """``embed_many`` was told to stop between two of its model runs: nothing of the batch is stored."""


class ModelNotReady(Exception):
    """Raised at once (never after waiting) when the model cannot embed right now."""

    def __init__(self, state: str, reason: str) -> None:
        super().__init__(f"embedding model {state}: {reason}")
        self.state = state
        self.reason = reason


# ---------------------------------------------------------------------------------------------
# Locating and installing
# ---------------------------------------------------------------------------------------------


def download_allowed(setting: bool) -> bool:
    """Only when the person asked (``embed.download``, off by default) and ``HF_HUB_OFFLINE`` is not set:
    kms promises local-only tools, so a missing model never makes it reach for the network by itself."""
    return setting and os.environ.get("HF_HUB_OFFLINE", "0") in ("", "0")


GET_MODEL_HINT = (
    "get it with `kms model download` (about 90 MB, from the model hub) or "
    "`kms model install --from DIR`, or let kms fetch it: `kms config set embed.download on`"
)


def no_telemetry() -> None:
    """Keep onnxruntime from writing a device id and telemetry store under ``~/.cache/Microsoft`` (it
    does on import unless told not to); called before anything imports it."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


def download_model() -> Path:
    """Let fastembed fetch the model into its own cache (progress on stderr); return the dir."""
    no_telemetry()
    # deferred: fastembed (onnxruntime) only to download the model
    from fastembed import TextEmbedding

    TextEmbedding(MODEL_NAME)
    cached = fastembed_cache_dirs()
    if not cached:
        raise RuntimeError("fastembed finished but no complete model is in its cache")
    return cached[-1]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def model_status(model_dir: str | Path | None = None, *, verify: bool = False, load: bool = False) -> dict[str, Any]:
    """What ``kms model status`` prints: which model, where, and whether it is usable.

    ``verify`` hashes ``model.onnx`` (reports whether it is the pinned int8 build); ``load``
    actually loads it (a second or two) and reports the load time or the failure.
    """
    loc = locate_model(model_dir)
    files_ok = loc["dir"] is not None and not loc["missing"]
    out: dict[str, Any] = {
        "model": MODEL_NAME,
        "dim": DIM,
        "dir": str(loc["dir"]) if loc["dir"] else None,
        "source": loc["source"],
        "searched": loc["searched"],
        "installDir": str(installed_model_dir()),
        "filesOk": files_ok,
        "missingFiles": loc["missing"],
        "ready": files_ok,
    }
    if not files_ok:
        out["reason"] = _missing_reason(loc)
        return out
    if verify:
        out["onnxSha256"] = sha256_file(Path(loc["dir"]) / "model.onnx")
        out["pinnedInt8"] = out["onnxSha256"] == PINNED_ONNX_SHA256
    if load:
        emb = Embedder(loc["dir"])
        emb.load()
        out["ready"] = emb.state == READY
        out["state"] = emb.state
        out["loadSeconds"] = emb.load_seconds
        if emb.reason:
            out["reason"] = emb.reason
    return out


def _missing_reason(loc: dict[str, Any]) -> str:
    if loc["dir"] is not None:
        return (
            f"model dir {loc['dir']} (from {loc['source']}) lacks {', '.join(loc['missing'])}; "
            f"`kms model install --from DIR` copies a complete one"
        )
    return f"no {MODEL_DIRNAME} model found (looked in {', '.join(loc['searched'])}); {GET_MODEL_HINT}"


def install_model(src: str | Path, dest: str | Path | None = None) -> Path:
    """Copy a model dir into the kms data dir (``kms model install --from DIR``); return the target.

    Verifies the required files first and copies into a temp dir renamed into place, so a failed
    copy never leaves a half model where the loader would pick it up.
    """

    src_dir = Path(src).expanduser().resolve()
    if not src_dir.is_dir():
        raise KmsError("invalid-input", f"{src_dir} is not a directory")
    absent = missing_files(src_dir)
    if absent:
        raise KmsError(
            "invalid-input",
            f"{src_dir} is not a model dir: it lacks {', '.join(absent)}",
            required=list(REQUIRED_FILES),
        )
    target = Path(dest) if dest is not None else installed_model_dir()
    target = target.expanduser().resolve()
    if target == src_dir:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        for name in REQUIRED_FILES:
            shutil.copyfile(src_dir / name, staging / name)
        if target.exists():
            old = target.with_name(f".{target.name}-old-{os.getpid()}")
            os.replace(target, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


# ---------------------------------------------------------------------------------------------
# The holder
# ---------------------------------------------------------------------------------------------


def _release_free_memory() -> None:
    """Give freed heap back to the OS (glibc): onnxruntime's graph optimisation and big batches
    leave freed-but-kept memory that would otherwise stay in the server's RSS."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def default_threads() -> int:
    """onnxruntime intra-op threads: every core, but at most 4.

    A single ONNX session with N intra-op threads is the fastest way to use N cores for one
    stream of batches (data-parallel worker processes would each load the model, costing RSS);
    past 4 threads a 6-layer MiniLM gains little and starves the rest of the server.
    """
    return max(1, min(os.cpu_count() or 1, 4))


class Embedder:
    """Holds the model; state ``not-loaded`` -> ``loading`` -> ``ready`` | ``missing`` | ``failed``.

    Every method that needs the model raises ``ModelNotReady`` immediately when it is not ready,
    and a failed load is remembered (``reset()`` is the only retry), so no caller ever waits on
    the model or pays for a doomed retry per batch. The ONNX session and tokenizer are
    thread-safe for inference, so one holder serves the search thread(s) and the background
    embedder at once.
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        threads: int | None = None,
        enabled: bool = True,
        download: bool = False,
    ) -> None:
        self.configured_dir = model_dir
        self.download = download
        self.threads = threads or default_threads()
        self.model_dir: Path | None = None
        self.source: str | None = None
        self.state = NOT_LOADED if enabled else DISABLED
        self.reason: str | None = None if enabled else "semantic search is turned off (embed.enabled = false)"
        self.load_seconds: float | None = None
        self._model: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        if not enabled:
            self._done.set()

    # -- state -----------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.state == READY

    def status(self) -> dict[str, Any]:
        return {
            "model": MODEL_NAME,
            "state": self.state,
            "reason": self.reason,
            "dir": str(self.model_dir) if self.model_dir else None,
            "source": self.source,
            "loadSeconds": self.load_seconds,
            "threads": self.threads,
        }

    def start(self) -> threading.Thread | None:
        """Load in a daemon thread (server start-up); a no-op unless ``not-loaded``."""
        with self._lock:
            if self.state != NOT_LOADED:
                return None
            self.state = LOADING
        t = threading.Thread(target=self._load, name="kms-embed-load", daemon=True)
        t.start()
        return t

    def load(self) -> bool:
        """Load in the calling thread (CLI ``kms embed``); returns whether the model is ready."""
        with self._lock:
            mine = self.state == NOT_LOADED
            if mine:
                self.state = LOADING
        if mine:
            self._load()
        else:
            self._done.wait()
        return self.ready

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a started load to finish (tests, CLI); returns whether ready."""
        self._done.wait(timeout)
        return self.ready

    def reset(self) -> None:
        """Forget a failure (e.g. after ``kms model install``) so the next ``start``/``load`` retries."""
        with self._lock:
            if self.state in (LOADING, DISABLED):
                return
            self.state, self.reason, self._model, self._tokenizer = NOT_LOADED, None, None, None
            self._done.clear()

    def _fail(self, state: str, reason: str) -> None:
        self._model = self._tokenizer = None
        self.state, self.reason = state, reason
        self._done.set()

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            loc = locate_model(self.configured_dir)
            if loc["dir"] is None and download_allowed(self.download):  # asked for
                self.reason = "downloading the model into fastembed's cache"
                try:
                    loc = {**loc, "dir": download_model(), "source": "fastembed-cache", "missing": []}
                except Exception as exc:  # offline or hub down: remembered like any failure
                    self._fail(
                        MISSING,
                        f"model not found locally and the download failed ({type(exc).__name__}: "
                        f"{exc}); {_missing_reason(loc)}",
                    )
                    return
            self.model_dir, self.source = loc["dir"], loc["source"]
            if loc["dir"] is None or loc["missing"]:
                self._fail(MISSING, _missing_reason(loc))
                return
            no_telemetry()
            # deferred: onnxruntime and its session are slow to load: only when a vector is asked for
            from server.index.embed.runtime import MiniLM

            model = MiniLM(loc["dir"], self.threads)
            tokenizer = model.tokenizer
            probe = model.embed(["probe"])[0]
            if probe.shape != (DIM,) or not np.all(np.isfinite(probe)):
                self._fail(FAILED, f"model in {loc['dir']} gives vectors of shape {probe.shape}, expected ({DIM},)")
                return
        except Exception as exc:  # a corrupt or incompatible model: remember, never retry per call
            self._fail(FAILED, f"could not load the model from {self.model_dir}: {type(exc).__name__}: {exc}")
            return
        finally:
            self.load_seconds = round(time.perf_counter() - started, 3)
        self._model, self._tokenizer = model, tokenizer
        _release_free_memory()
        self.state, self.reason = READY, None
        self._done.set()

    def require_ready(self) -> Any:
        """The loaded model, else ``ModelNotReady`` saying why; ``embed_pending`` calls it first so a
        run fails at once, before it reads any note."""
        model = self._model
        if self.state != READY or model is None:
            reason = self.reason or (
                "the model is still loading" if self.state == LOADING else "the model has not been loaded"
            )
            raise ModelNotReady(self.state, reason)
        return model

    # -- work ------------------------------------------------------------------------------
    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word-piece counts without special tokens (what the 256-token window is spent on)."""
        self.require_ready()
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One batch -> ``(n, DIM)`` float32, L2-normalised. Callers batch; see ``embed_many``."""
        model = self.require_ready()
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        try:
            return model.embed(texts)
        except Exception as exc:  # the session itself broke: stop using it
            self._fail(FAILED, f"embedding failed: {type(exc).__name__}: {exc}")
            raise ModelNotReady(FAILED, self.reason or "") from exc

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_many(
        self,
        texts: Sequence[str],
        token_counts: Sequence[int] | None = None,
        *,
        max_batch: int = 32,
        max_batch_tokens: int = 4096,
        should_stop: Callable[[], bool] | None = None,
    ) -> np.ndarray:
        """Embed any number of texts, batched by similar length; rows in the input order.

        Sorting by token count means a batch pads to nearly its own length instead of the
        longest text in a random batch (far less padding on notes of mixed lengths), and a token budget
        per batch keeps attention buffers (batch x len^2) from ballooning RSS on long chunks.

        ``should_stop`` is asked before each model run (``EmbeddingStopped``): a process being stopped must
        not wait out a whole batch of long notes, which takes over 10 s on a busy 2-core machine, and a
        model run still going when the interpreter finalises aborts the process (SIGABRT).
        """
        n = len(texts)
        out = np.zeros((n, DIM), dtype=np.float32)
        if n == 0:
            return out
        counts = list(token_counts) if token_counts is not None else self.count_tokens(texts)
        order = sorted(range(n), key=lambda i: counts[i])
        batch: list[int] = []
        longest = 0
        for i in order:
            length = min(counts[i], MAX_TOKENS - 2) + 2
            padded = max(longest, length) * (len(batch) + 1)
            if batch and (len(batch) >= max_batch or padded > max_batch_tokens):
                if should_stop is not None and should_stop():
                    raise EmbeddingStopped
                out[batch] = self.embed([texts[j] for j in batch])
                batch, longest = [], 0
            batch.append(i)
            longest = max(longest, length)
        if batch:
            if should_stop is not None and should_stop():
                raise EmbeddingStopped
            out[batch] = self.embed([texts[j] for j in batch])
        _release_free_memory()
        return out
