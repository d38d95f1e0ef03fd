"""The one decoding rule for everything Clavain reads: command-line arguments, files, stdin and
hook payloads. Stdlib only (hooks use it).

- Bytes are UTF-8; a leading BOM is dropped. Undecodable bytes are an error naming where they
  were (`strict`), or replaced with U+FFFD where the text is only shown or stored as a log
  (`lenient`: a runner's output holds whatever its tools printed).
- Text that came through `surrogateescape` (how Python hands over undecodable argv bytes) is
  refused before anything is stored: one stored lone surrogate breaks every later reader.
- JSON that nests too deeply for the parser is bad input, not a crash.
- Text a store must keep whatever it holds (a runner's summary, an event's note) is made
  storable the same way for SQLite and PostgreSQL (`storable`): PostgreSQL refuses NUL in text,
  and neither keeps a lone surrogate, so NUL becomes "␀" (U+2400, the symbol for it) and a lone
  surrogate U+FFFD — visibly, never silently dropped.
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


NUL_SYMBOL = "\u2400"


def storable(text: str) -> str:
    """`text` as both stores keep it (module docstring)."""
    if "\x00" in text:
        text = text.replace("\x00", NUL_SYMBOL)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= char <= "\udfff" else char for char in text)
    return text


def storable_tree(value: object) -> tuple[object, int]:
    """`value` (JSON-shaped: dicts, lists, text) with every text made `storable`, and how many
    texts had to change."""
    if isinstance(value, str):
        kept = storable(value)
        return kept, int(kept != value)
    if isinstance(value, list):
        pairs = [storable_tree(item) for item in value]
        return [item for item, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        changed, out = 0, {}
        for key, item in value.items():
            new_key, key_changed = storable_tree(key) if isinstance(key, str) else (key, 0)
            out[new_key], item_changed = storable_tree(item)
            changed += key_changed + item_changed
        return out, changed
    return value, 0


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
