"""Incremental parser of one OpenAI-API SSE response (pure: bytes and arrival times in, token arrivals out).

The load generator's hot path, run once per read of every stream. Every event of one read shares that
read's arrival time; a chunk's token count is the usage delta, else its `token_ids`, never one per chunk;
a chunk without a token is no arrival; the first malformed or error event stops the parse."""

from __future__ import annotations

import orjson

ERROR_BODY_CHARS = 500


class StreamState:
    """Incremental SSE parser of one response: bytes in, token arrivals out (the hot path)."""

    __slots__ = ("chat", "buf", "times", "counts", "counts_known", "texts", "done", "error", "error_kind",
                 "cumulative", "final_completion", "prompt_tokens", "finish_reason")

    def __init__(self, *, chat: bool) -> None:
        self.chat = chat
        self.buf = b""
        self.times: list[float] = []
        self.counts: list[int] = []
        self.counts_known = True
        self.texts: list[str] = []
        self.done = False
        self.error: str | None = None
        self.error_kind: str | None = None
        self.cumulative: int | None = None
        self.final_completion: int | None = None
        self.prompt_tokens: int | None = None
        self.finish_reason: str | None = None

    def feed(self, data: bytes, now: float) -> None:
        """Consume bytes that arrived at `now`; every complete event in them shares that time."""
        buf = self.buf + data if self.buf else data
        if b"\r" in buf:  # SSE allows CRLF; normalise the whole buffer so a split CR LF still joins
            buf = buf.replace(b"\r\n", b"\n")
        cut = buf.find(b"\n\n")
        while cut >= 0:
            event = buf[:cut]
            buf = buf[cut + 2 :]
            if event:
                self._event(event, now)
                if self.error is not None:
                    break
            cut = buf.find(b"\n\n")
        self.buf = buf

    def _event(self, event: bytes, now: float) -> None:
        if event.startswith(b"data: ") and b"\n" not in event:
            payload = event[6:]
        else:
            parts = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
            if not parts:
                return  # a comment (": ping") or a field without data
            payload = b"\n".join(parts)
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self._fail("stream", f"a chunk is not JSON: {payload[:200].decode(errors='replace')!r}")
            return
        if not isinstance(obj, dict):
            self._fail("stream", "a chunk is not a JSON object")
            return
        if obj.get("error") is not None:
            self._fail(
                "server_error", f"the server reported an error mid-stream: {str(obj['error'])[:ERROR_BODY_CHARS]}"
            )
            return
        usage = obj.get("usage")
        cumulative = None
        if usage:
            cumulative = usage.get("completion_tokens")
            if usage.get("prompt_tokens") is not None:
                self.prompt_tokens = usage["prompt_tokens"]
        choices = obj.get("choices")
        if not choices:
            if cumulative is not None:
                self.final_completion = cumulative
            return
        choice = choices[0]
        piece = (choice.get("delta") or {}).get("content") if self.chat else choice.get("text")
        if piece:
            self.texts.append(piece)
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        if cumulative is not None:
            n = cumulative - (self.cumulative or 0)
            self.cumulative = cumulative
        elif choice.get("token_ids") is not None:
            n = len(choice["token_ids"])
        elif piece:
            # Text but no count: an arrival whose size only the total can tell.
            self.counts_known = False
            self.times.append(now)
            self.counts.append(0)
            return
        else:
            return
        if n > 0:
            self.times.append(now)
            self.counts.append(n)
        elif n < 0:
            self._fail("stream", f"usage.completion_tokens went backwards ({cumulative})")

    def _fail(self, kind: str, message: str) -> None:
        self.error_kind, self.error = kind, message

    def output_tokens(self) -> int | None:
        """The server's final count; else the last cumulative usage; else the sum of known chunk counts."""
        if self.final_completion is not None:
            return self.final_completion
        if self.cumulative is not None:
            return self.cumulative
        return sum(self.counts) if self.counts_known and self.counts else None

    def verdict(self) -> tuple[str | None, str | None]:
        """(error_kind, error) of a stream that arrived whole; (None, None) for a success."""
        if self.error is not None:
            return self.error_kind, self.error
        if not self.done:
            return "stream", "the stream ended without `data: [DONE]`"
        if not self.times:
            return "no_tokens", "the stream carried no token"
        if self.output_tokens() is None:
            return "no_token_counts", (
                "the server sent neither usage nor token ids; it must honour stream_options.include_usage "
                "(vLLM does) or return_token_ids"
            )
        return None, None
