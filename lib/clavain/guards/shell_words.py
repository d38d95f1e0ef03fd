"""How the shell splits a command, for the budgets: parts (on `&&`, `||`, `;`, `|`, `&` and
newlines; quotes, escapes, `$(…)`, comments and heredoc bodies respected) and each part's words
(quotes and escapes removed, redirections set apart, substitutions collected). Stdlib only, no
regex: PreToolUse runs on every tool call."""

from __future__ import annotations

MAX_CHARS = 64 * 1024  # a longer command is judged by its start (a 2 MB heredoc took 2 s)

def split_parts(command: str) -> list[str]:
    """The simple commands of a compound one, stripped; separators inside quotes, after a
    backslash or inside `$(…)` do not split; comments and heredoc bodies are dropped."""
    return [part for part, _ in split(command)]


def split(command: str) -> list[tuple[str, str]]:
    """(part, the bodies of the heredocs it opens) for each part of `command`."""
    command = command[:MAX_CHARS]
    parts: list[list[str]] = []
    current: list[str] = []
    quote = None
    depth = 0
    heredocs: list[tuple[str, int]] = []  # (delimiter, index of the part that opened it)
    index = 0
    length = len(command)
    while index < length:
        char = command[index]
        if quote:
            current.append(char)
            if char == "\\" and quote == '"' and index + 1 < length:
                current.append(command[index + 1])
                index += 1
            elif char == quote:
                quote = None
        elif char == "\\" and index + 1 < length:
            current.append(command[index:index + 2])
            index += 1
        elif char in "'\"":
            quote = char
            current.append(char)
        elif char == "#" and (not current or current[-1] in " \t"):
            end = command.find("\n", index)
            index = length if end < 0 else end  # a comment: on to the newline
            continue
        elif char == "<" and command[index + 1:index + 3] == "<<":
            current.append("<<<")  # a here-string, no heredoc
            index += 3
            continue
        elif char == "<" and command[index + 1:index + 2] == "<":
            index, delimiter = _heredoc_delimiter(command, index + 2)
            if delimiter:
                heredocs.append((delimiter, len(parts)))
            current.append("<<")
            continue
        elif char == "$" and command[index + 1:index + 2] == "(":
            depth += 1
            current.append("$(")
            index += 1
        elif char == ")" and depth:
            depth -= 1
            current.append(char)
        elif char == "&" and (command[index - 1:index] == ">" or
                              command[index + 1:index + 2] == ">"):
            current.append(char)  # a redirection (`2>&1`, `&>`), not a separator
        elif char == "|" and command[index - 1:index] == ">":
            current.append(char)  # `>|`: a redirection past noclobber, not a pipe
        elif depth == 0 and char in ";|&\n":
            parts.append(["".join(current), ""])
            current = []
            if char == "\n" and heredocs:
                index = _skip_heredocs(command, index + 1, heredocs, parts)
                heredocs = []
                continue
            if command[index + 1:index + 2] == char and char in "|&":
                index += 1  # `&&` / `||`
        else:
            current.append(char)
        index += 1
    parts.append(["".join(current), ""])
    return [(part.strip(), body) for part, body in parts if part.strip()]


def _heredoc_delimiter(command: str, index: int) -> tuple[int, str]:
    """(index after the delimiter word, the delimiter) of a `<<WORD`, `<<-'WORD'`, `<< "W"`."""
    if command[index:index + 1] == "-":
        index += 1
    while command[index:index + 1] in (" ", "\t"):
        index += 1
    start = index
    while index < len(command) and command[index] not in " \t\n;|&<>()":
        index += 1
    return index, command[start:index].strip("'\"\\")


def _skip_heredocs(command: str, index: int, heredocs: list[tuple[str, int]],
                   parts: list[list[str]]) -> int:
    """Past the bodies of the heredocs opened on the line that just ended; each body is kept
    with the part that opened it (a shell reads it as commands)."""
    for delimiter, owner in heredocs:
        lines = []
        while index < len(command):
            end = command.find("\n", index)
            line = command[index:] if end < 0 else command[index:end]
            index = len(command) if end < 0 else end + 1
            if line.strip() == delimiter:
                break
            lines.append(line)
        if owner < len(parts):
            parts[owner][1] += "\n".join(lines) + "\n"
    return index


def _close(text: str, index: int, opening: str = "(", closing: str = ")") -> int:
    """The index of the bracket closing the one at `index` (quotes respected), else len."""
    depth = 0
    quote = None
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = None
        elif char == "\\":
            index += 1
        elif char in "'\"":
            quote = char
        elif char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if not depth:
                return index
        index += 1
    return len(text)


def tokens(part: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """(words, quotes and escapes removed; paths written by redirections; command strings of
    substitutions: `$(…)`, backticks, `<(…)`, `>(…)`; here-strings) of one part."""
    words: list[str] = []
    writes: list[str] = []
    nested: list[str] = []
    here: list[str] = []
    buf: list[str] = []
    started = False
    target = ""  # what the next word is: "w" a path written, "d" a `>&` target, "r", "h"
    double = False
    index = 0
    length = len(part)

    def end() -> None:
        nonlocal started, target
        if started:
            word = "".join(buf)
            if target == "h":
                here.append(word)
            elif target == "w" or (target == "d" and not (word.isdigit() or word == "-")):
                writes.append(word)
            elif not target:
                words.append(word)
            target = ""
        buf.clear()
        started = False

    while index < length:
        char = part[index]
        following = part[index + 1:index + 2]
        if char == "$" and following == "(":
            close = _close(part, index + 1)
            if not (part[index + 2:index + 3] == "(" and _close(part, index + 2) == close - 1):
                nested.append(part[index + 2:close])  # not `$((…))`: arithmetic
            buf.append(part[index:close + 1])
            started, index = True, close + 1
        elif char == "$" and following == "{":
            close = _close(part, index + 1, "{", "}")
            buf.append(part[index:close + 1])
            started, index = True, close + 1
        elif char == "`":
            close = index + 1
            while close < length and part[close] != "`":
                close += 2 if part[close] == "\\" else 1
            nested.append(part[index + 1:close].replace("\\`", "`"))
            buf.append(part[index:close + 1])
            started, index = True, close + 1
        elif double:
            if char == '"':
                double = False
            elif char == "\\" and following and following in '"\\$`\n':
                buf.append(following)
                index += 1
            else:
                buf.append(char)
            index += 1
        elif char == '"':
            double = started = True
            index += 1
        elif char == "'":
            close = part.find("'", index + 1)
            close = length if close < 0 else close
            buf.append(part[index + 1:close])
            started, index = True, close + 1
        elif char == "\\":
            if following and following != "\n":
                buf.append(following)
                started = True
            index += 2
        elif char in "<>" and following == "(":
            close = _close(part, index + 1)
            nested.append(part[index + 2:close])
            buf.append(part[index:close + 1])
            started, index = True, close + 1
        elif char in "<>" or (char == "&" and following == ">"):
            if started and not "".join(buf).isdigit():
                end()
            buf.clear()  # a file descriptor number (`2>`) is no word
            started = False
            close = index
            while close < length and part[close] in "<>&|":
                close += 1
            operator = part[index:close]
            target = ("h" if operator.startswith("<<<") else "" if operator.startswith("<<")
                      else "d" if operator in (">&", "<&") and char == ">" else
                      "w" if ">" in operator else "r")
            index = close
        elif char in " \t\n\r();|&":
            end()
            index += 1
        else:
            buf.append(char)
            started = True
            index += 1
    end()
    return words, writes, nested, here
