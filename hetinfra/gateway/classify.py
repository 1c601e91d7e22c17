"""What a request carries at arrival: its prompt's token count and its output budget (max_tokens).

Token counting: with ``--tokenizer MODEL=PATH`` (a local ``tokenizer.json``, read with the
``tokenizers`` package when it is installed; nothing is downloaded) the count is exact. Otherwise a
fast approximation: **ceil(characters / 4)** per text (English BPE text with Llama-3/GPT-style
vocabularies averages ~4 characters per token), plus 4 tokens per chat message for the template.
Token-id prompts are counted exactly. A batch of several prompts is refused (:func:`one_sequence`).

Output budget: ``max_completion_tokens`` or ``max_tokens``; when a request carries neither, the
model's ``default_max_tokens`` (the largest output edge the plan has for it, i.e. the request is
assumed to use the largest planned output).
"""

from __future__ import annotations

import math
from pathlib import Path

from hetinfra.errors import InvalidInputError

CHARS_PER_TOKEN = 4
CHAT_TOKENS_PER_MESSAGE = 4


class RequestError(ValueError):
    """A request the gateway rejects with 400; ``param`` names the offending field."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


def approx_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class TokenCounter:
    """Counts prompt tokens per model: a local tokenizer where one is configured, else the approximation."""

    def __init__(self, tokenizers: dict[str, str] | None = None):
        self._tok: dict[str, object] = {}
        for model, path in (tokenizers or {}).items():
            self._tok[model] = load_tokenizer(path)

    def exact(self, model: str) -> bool:
        return model in self._tok

    def text(self, model: str, text: str) -> int:
        tok = self._tok.get(model)
        if tok is None:
            return approx_tokens(text)
        return len(tok.encode(text, add_special_tokens=False).ids)

    def prompt_tokens(self, model: str, kind: str, body: dict) -> int:
        if kind == "chat":
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise RequestError("'messages' must be a non-empty list", "messages")
            total = 3
            for m in messages:
                if not isinstance(m, dict):
                    raise RequestError("each message must be an object", "messages")
                total += CHAT_TOKENS_PER_MESSAGE
                content = m.get("content")
                if isinstance(content, str):
                    total += self.text(model, content)
                elif isinstance(content, list):
                    for part in content:
                        if isinstance(part, dict) and isinstance(part.get("text"), str):
                            total += self.text(model, part["text"])
            return total
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            return self.text(model, prompt)
        if isinstance(prompt, list) and prompt:
            if all(isinstance(x, int) for x in prompt):
                return len(prompt)
            counts = []
            for p in prompt:
                if isinstance(p, str):
                    counts.append(self.text(model, p))
                elif isinstance(p, list) and all(isinstance(x, int) for x in p):
                    counts.append(len(p))
                else:
                    raise RequestError("'prompt' must be a string, a list of strings or token ids", "prompt")
            return max(counts)
        raise RequestError("'prompt' must be a non-empty string, list of strings or token ids", "prompt")


#: the largest max_tokens a request may ask for (no model generates more; 10**30 would reach the demand log)
MAX_OUTPUT_TOKENS = 10_000_000


def stream_flag(body: dict) -> bool:
    """Whether the request asks for a stream: ``stream`` true, false or absent (null); 400 otherwise. Read by its
    truth, ``"stream": "false"`` (or ``"0"``) was a stream to the gateway, which vLLM (pydantic, lax) reads as
    false: its JSON answer went through the stream relay and was counted as a stream's events (0 output tokens
    in the demand log a re-plan reads)."""
    value = body.get("stream")
    if value is not None and not isinstance(value, bool):
        raise RequestError("'stream' must be true or false", "stream")
    return bool(value)


#: the request fields that ask one request for several sequences (the OpenAI API's n, vLLM's best_of)
SEQUENCE_KEYS = ("n", "best_of")


def one_sequence(body: dict) -> None:
    """A request asks for one completion: ``n`` and ``best_of`` absent, null or 1, and one ``prompt``; 400
    otherwise (a completions ``prompt`` of 8 texts was 8 completions, as ``"n": 8`` is). The fleet is
    planned, and the demand log counts, one sequence per request: ``"n": 8`` made vLLM decode 8 sequences for one
    request the gateway routed, counted and logged as one (a re-plan from that log sized the fleet for an eighth
    of its decode work)."""
    for key in SEQUENCE_KEYS:
        value = body.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value != 1):
            raise RequestError(f"'{key}' must be 1: the fleet is planned for one completion per request "
                               f"(send {key} requests instead)", key)
    if several_prompts(body.get("prompt")):  # /v1/completions' batch: one completion per prompt, as n is
        raise RequestError("'prompt' must be one prompt: the fleet is planned for one completion per request "
                           "(send one request per prompt)", "prompt")


def several_prompts(prompt) -> bool:
    """Whether a completions ``prompt`` is a batch of more than one prompt (a list of texts or of token-id
    lists); a list of token ids is one prompt."""
    return isinstance(prompt, list) and len(prompt) > 1 and any(isinstance(p, (str, list)) for p in prompt)


def output_budget(body: dict, default: int) -> int:
    """max_completion_tokens, else max_tokens, else ``default``; 400 when not a whole number >= 1."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_OUTPUT_TOKENS:
            raise RequestError(f"'{key}' must be a whole number from 1 to {MAX_OUTPUT_TOKENS}", key)
        return value
    return default


def load_tokenizer(path: str):
    """The tokenizer at ``path`` (a tokenizer.json or its folder): a path no file can have
    (hetinfra.envpaths.path_problem; Path.is_dir raised on a 300-byte name) or a file the tokenizers
    package cannot read (its own exception, a traceback) is exit 2 naming the flag."""
    from hetinfra.envpaths import path_problem

    try:
        from tokenizers import Tokenizer  # optional; never downloads
    except ImportError:
        raise InvalidInputError("--tokenizer needs the 'tokenizers' package (pip install tokenizers)",
                                hint="or leave --tokenizer out: the gateway then approximates 4 characters per token") from None
    problem = path_problem(path) if path.strip() else "is empty"
    if problem:
        raise InvalidInputError(f"--tokenizer {path[:60]!r}: {problem}", hint="give MODEL=PATH of a local tokenizer.json")
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise InvalidInputError(f"--tokenizer: {p} not found (a local tokenizer.json; nothing is downloaded)")
    try:
        return Tokenizer.from_file(str(p))
    except Exception as exc:  # noqa: BLE001 - the package's own error types (a Rust panic's, an OSError)
        raise InvalidInputError(f"--tokenizer: {p} is not a tokenizer the tokenizers package reads "
                                f"({str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__})",
                                hint="give the tokenizer.json of the model's Hugging Face repository") from None
