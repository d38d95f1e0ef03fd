"""The one decoding rule for everything Clavain reads: command-line arguments, files, stdin and
hook payloads. Stdlib only (hooks use it).

- Bytes are UTF-8; a leading BOM is dropped. Undecodable bytes are an error naming where they
  were (`strict`), or replaced with U+FFFD where the text is only shown or stored as a log
  (`lenient`: a runner's output holds whatever its tools printed).
- Text that came through `surrogateescape` (how Python hands over undecodable argv bytes) is
  refused before anything is stored: one stored lone surrogate breaks every later reader.
- JSON that nests too deeply for the parser is bad input, not a crash.
"""

from __future__ import annotations

BOM = "\ufeff"


class BadText(ValueError):
    """Input that is not text Clavain can store: the message names where and why."""


def decode(raw: bytes, where: str, *, lenient: bool = False) -> str:
    """`raw` as text by the rule above."""
    try:
        text = raw.decode("utf-8", errors="replace" if lenient else "strict")
    except UnicodeDecodeError as exc:
        raise BadText(f"{where}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    return text[1:] if text.startswith(BOM) else text


def check(text: str, where: str) -> str:
    """`text` unchanged if it can be stored as UTF-8; BadText naming `where` otherwise."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadText(f"{where}: not UTF-8 text (character {exc.start} stands for an "
                      "undecodable byte)") from None
    return text


def scrub(text: str) -> str:
    """`text` with anything unencodable replaced, for what must be kept whatever it holds
    (an agent's answer, a log line)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")
    return text


def load_json(text: str, where: str) -> object:
    """Parse JSON text; a BOM is dropped; bad or absurdly nested JSON is BadText. Through
    `fastjson` (the `json` package's own C parser without its `re` import): hooks read
    payloads with this on every tool call."""
    from clavain import fastjson

    if text.startswith(BOM):
        text = text[1:]
    try:
        return fastjson.loads(text)
    except RecursionError:
        raise BadText(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:
        raise BadText(f"{where}: not valid JSON ({exc})") from None


def clip(text: object, limit: int = 120) -> str:
    """`text` on one line (runs of whitespace made one space), cut to `limit` characters with
    an ellipsis: how a message, an error or a title is shown inside a line."""
    one_line = " ".join(str(text).split())
    return one_line if len(one_line) <= limit else one_line[:limit - 1] + "…"
