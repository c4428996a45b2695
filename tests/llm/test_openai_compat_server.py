"""Protocol compatibility: OpenAIBackend against a real OpenAI-compatible server, `transformers serve`.

The server runs as a subprocess on a free 127.0.0.1 port and serves a tiny random Qwen2 built
offline (tests/tiny_models.py). Its request validator rejects unknown fields with HTTP 422, so a
successful call also proves that every field the backend sends is part of the OpenAI schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.llm.config import OpenAIBackendConfig
from pipelines.llm.openai_backend import OpenAIBackend
from pipelines.llm.types import LLMError, SamplingParams

pytestmark = pytest.mark.slow

READY_TIMEOUT_S = 150.0
ROOT = Path(__file__).resolve().parents[2]


def _serve_available() -> bool:
    try:
        from transformers.utils.import_utils import is_serve_available

        return is_serve_available()
    except ImportError:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_ready(proc: subprocess.Popen, port: int, log_path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"transformers serve exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"transformers serve not ready after {READY_TIMEOUT_S}s:\n{log_path.read_text()[-3000:]}")


# One subprocess builds the tiny model and then serves it, so torch and transformers load once, not twice.
SERVER_SCRIPT = """
import sys
from tests.tiny_models import tiny_qwen2
tiny_qwen2(sys.argv[1])
from transformers.cli.transformers import main
sys.argv = ["transformers", "serve", *sys.argv[1:]]
sys.exit(main())
"""


@pytest.fixture(scope="module")
def served_model(tmp_path_factory):
    """(base_url, model name) of a running `transformers serve` pinned to a tiny random Qwen2."""
    if not _serve_available():
        pytest.skip("transformers serve needs its serving extras: pip install fastapi uvicorn openai")
    root = tmp_path_factory.mktemp("serve")
    model_dir = str(root / "tiny-qwen2")
    with serving([sys.executable, "-c", SERVER_SCRIPT, model_dir], root) as url:
        yield url, model_dir


@contextlib.contextmanager
def serving(argv: list[str], root: Path) -> Iterator[str]:
    """The base URL of `transformers serve` started as ``argv`` on a free port (CPU, float32; log in
    ``root``). Its /v1/models lists the models of the Hugging Face cache, never one loaded from a
    path: with an empty cache it answers HTTP 500 (the name is not checked against a list), whatever
    this machine has cached (docs/runtime.md)."""
    port, log_path = _free_port(), root / "serve.log"
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["HF_HUB_CACHE"] = str(root / "empty-hf-cache")
    command = [*argv, "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--dtype", "float32"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_ready(proc, port, log_path)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _backend(base_url: str, model: str, **overrides) -> OpenAIBackend:
    spec = {"kind": "openai", "model": model, "base_urls": [base_url], "api_key_env": None, "timeout_s": 60.0}
    return OpenAIBackend(OpenAIBackendConfig(**(spec | overrides)))


def test_chat_through_transformers_serve(served_model):
    base_url, model = served_model
    schema = {  # closed and fully required, so the backend sends "strict": true as well
        "title": "answer",
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    messages = [
        {"role": "system", "content": "You are a maths tutor."},
        {"role": "user", "content": "What is 1/2 + 1/4?"},
    ]

    async def main():
        backend = _backend(base_url, model)
        try:
            await backend.preflight(schema=False)  # the server is up and answers to the name: no error
            with pytest.raises(LLMError, match="answered outside the JSON schema it was sent"):
                await backend.preflight()  # it ignores response_format: a json-mode run is refused
            plain, concurrent = await asyncio.gather(
                backend.chat(messages, SamplingParams(max_tokens=6, seed=1)),
                backend.chat(messages, SamplingParams(max_tokens=4, stop=("\n",), json_schema=schema, seed=2)),
            )
        finally:
            await backend.close()
        return plain, concurrent

    plain, concurrent = asyncio.run(main())
    for result, max_tokens in ((plain, 6), (concurrent, 4)):
        assert len(result.choices) == 1
        assert isinstance(result.text, str)
        assert result.finish_reason in {"stop", "length"}
        assert result.usage.prompt_tokens > 10  # system + user turns through the Qwen chat template
        assert 1 <= result.usage.completion_tokens <= max_tokens
        assert model in result.model


def test_real_server_4xx_fails_at_once_with_its_message(served_model):
    base_url, _ = served_model

    async def main():
        backend = _backend(base_url, "some-other-model", max_retries=3)
        try:
            with pytest.raises(LLMError) as err:
                await backend.chat([{"role": "user", "content": "hi"}], SamplingParams(max_tokens=2))
        finally:
            await backend.close()
        return backend, str(err.value)

    backend, message = asyncio.run(main())
    assert backend.retries == 0
    assert "HTTP 400" in message and base_url in message and "some-other-model" in message
