"""SQLite's placeholders in psycopg's form, for a named query whose PostgreSQL text is the
SQLite text (`store.queries` translates each once, when its group is loaded)."""

from __future__ import annotations

_translated: dict[str, str] = {}


def to_psycopg(sql: str) -> str:
    """`?` → `%s`, `:name` → `%(name)s`, a literal `%` → `%%`; quoted text and `::` casts kept.
    Cached: the statements are a fixed set."""
    done = _translated.get(sql)
    if done is not None:
        return done
    out, i, n = [], 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "-" and sql.startswith("--", i):  # a comment, kept as it is
            end = sql.find("\n", i)
            end = n if end == -1 else end
            out.append(sql[i:end].replace("%", "%%"))
            i = end
        elif c in "'\"":
            end = sql.find(c, i + 1)
            while end != -1 and end + 1 < n and sql[end + 1] == c:  # doubled quote
                end = sql.find(c, end + 2)
            end = n - 1 if end == -1 else end
            out.append(sql[i:end + 1].replace("%", "%%"))
            i = end + 1
        elif c == "?":
            out.append("%s")
            i += 1
        elif c == ":" and i + 1 < n and sql[i + 1] == ":":
            out.append("::")
            i += 2
        elif c == ":" and i + 1 < n and (sql[i + 1].isalpha() or sql[i + 1] == "_"):
            j = i + 1
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            out.append(f"%({sql[i + 1:j]})s")
            i = j
        elif c == "%":
            out.append("%%")
            i += 1
        else:
            out.append(c)
            i += 1
    done = "".join(out)
    _translated[sql] = done
    return done
