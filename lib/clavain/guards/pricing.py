"""What tokens cost, per model: input, output, cache reads, and the two cache-write rates (a
1-hour cache write costs 2x input, a 5-minute one 1.25x; pricing them alike under-reports).

USD per million tokens, Anthropic's list prices for the Claude API. Every row names its source:
Anthropic's pricing page or the model's own overview page on platform.claude.com (checked
2026-11-23); a model no Anthropic page prices has no row. Batch, fast-mode, regional
(`inference_geo`) and cloud-provider prices are not modelled. Claude Haiku 5.5 is priced by
prompt length; usage is priced per model over a whole run, so its row holds the band for
prompts up to 100,000 tokens (a longer prompt costs 5x: under-reported).

Matching a model id: a cloud provider's prefix (`us.anthropic.`, `anthropic.`) is ignored, and
the longest row id the model id starts with wins when what follows is a date, `@…`, `[1m]`,
`-v1:0` or `-latest` — never another version number (`claude-opus-4-9` is not Opus 4).

The rule for an unknown model (shown in `clavain report` as "priced as X: unknown model Y"): a
model id naming a family (opus, sonnet, haiku, fable, mythos) is priced as that family's
newest row (FAMILY); any other id as the dearest row (FALLBACK), so an unknown model is
never the reason a dollar budget runs over.
"""

from __future__ import annotations

PRICING = "https://platform.claude.com/docs/en/about-claude/pricing"
PRICING_CLAUDE_3_4 = ("https://docs.anthropic.com/en/docs/about-claude/pricing (the same page "
                      "at its earlier address, with the Claude 3 and Sonnet 4 rows)")


def _overview(slug: str) -> str:
    return f"https://platform.claude.com/docs/en/models/{slug}/overview (Pricing)"


# model id: (input, output, cache write 5 min, cache write 1 h, cache read, source)
ROWS = {
    "claude-fable-5-1": (10.0, 50.0, 12.5, 20.0, 0.25, PRICING),
    "claude-fable-5": (10.0, 50.0, 12.5, 20.0, 1.0, PRICING),
    "claude-mythos-5-1": (10.0, 50.0, 12.5, 20.0, 0.25, PRICING),
    "claude-mythos-5": (10.0, 50.0, 12.5, 20.0, 1.0, PRICING),
    "claude-opus-5-5": (4.0, 20.0, 5.0, 8.0, 0.20, _overview("opus-5-5")),
    "claude-opus-5": (5.0, 25.0, 6.25, 10.0, 0.50, PRICING),
    "claude-opus-4-8": (5.0, 25.0, 6.25, 10.0, 0.50, PRICING),
    "claude-opus-4-7": (5.0, 25.0, 6.25, 10.0, 0.50, PRICING),
    "claude-opus-4-6": (5.0, 25.0, 6.25, 10.0, 0.50, PRICING),
    "claude-opus-4-5": (5.0, 25.0, 6.25, 10.0, 0.50, PRICING),
    "claude-opus-4-1": (15.0, 75.0, 18.75, 30.0, 1.50, PRICING),
    "claude-opus-4": (15.0, 75.0, 18.75, 30.0, 1.50, PRICING),
    "claude-opus-4-0": (15.0, 75.0, 18.75, 30.0, 1.50, PRICING),  # Opus 4's alias
    "claude-3-opus": (15.0, 75.0, 18.75, 30.0, 1.50, PRICING_CLAUDE_3_4),
    "claude-sonnet-5-5": (2.0, 10.0, 2.5, 4.0, 0.20, _overview("sonnet-5-5")),
    "claude-sonnet-5": (2.0, 10.0, 2.5, 4.0, 0.20, _overview("sonnet-5")),
    "claude-sonnet-4-6": (3.0, 15.0, 3.75, 6.0, 0.30, PRICING),
    "claude-sonnet-4-5": (3.0, 15.0, 3.75, 6.0, 0.30, PRICING),
    "claude-sonnet-4": (3.0, 15.0, 3.75, 6.0, 0.30, PRICING_CLAUDE_3_4),
    "claude-sonnet-4-0": (3.0, 15.0, 3.75, 6.0, 0.30, PRICING_CLAUDE_3_4),  # Sonnet 4's alias
    "claude-3-7-sonnet": (3.0, 15.0, 3.75, 6.0, 0.30, PRICING_CLAUDE_3_4),
    "claude-3-5-sonnet": (3.0, 15.0, 3.75, 6.0, 0.30, PRICING_CLAUDE_3_4),
    "claude-haiku-5-5": (0.10, 0.50, 0.125, 0.20, 0.01, _overview("haiku-5-5")),
    "claude-haiku-4-5": (1.0, 5.0, 1.25, 2.0, 0.10, PRICING),
    "claude-3-5-haiku": (0.80, 4.0, 1.0, 1.6, 0.08, PRICING_CLAUDE_3_4),
    "claude-3-haiku": (0.25, 1.25, 0.30, 0.50, 0.03, PRICING_CLAUDE_3_4),
}
PRICES = {model: row[:5] for model, row in ROWS.items()}
SOURCES = {model: row[5] for model, row in ROWS.items()}
FAMILY = {"opus": "claude-opus-5-5", "sonnet": "claude-sonnet-5-5", "haiku": "claude-haiku-5-5",
          "fable": "claude-fable-5-1", "mythos": "claude-mythos-5-1"}
FALLBACK = max(PRICES, key=lambda model: PRICES[model][:2])  # the dearest: Opus 4.1


def _version_at(name: str, at: int) -> bool:
    """A version number starts at `at`: `-` and one or two digits (`-9`), not a date
    (`-20250514`). No `re`: SubagentStop prices every reviewer."""
    end = at + 1
    while end < len(name) and name[end].isdecimal():
        end += 1
    return name.startswith("-", at) and 1 <= end - at - 1 <= 2


def priced_as(model: str | None) -> tuple[str, str | None]:
    """(the row `model` is priced at, None when it is that model's own row, else the note
    the report shows: which rule priced it)."""
    name = (model or "").lower()
    # Bedrock and Vertex ids carry a prefix (`us.anthropic.claude-sonnet-4-5…`).
    name = name[name.find("claude-"):] if "claude-" in name else name
    known = [row for row in PRICES if name == row or (
        name.startswith(row) and name[len(row)] in "-@[:" and not _version_at(name, len(row)))]
    if known:
        return max(known, key=len), None
    family = next((word for word in FAMILY if word in name), None)
    row = FAMILY[family] if family else FALLBACK
    why = f"the newest {family} row" if family else "no family named: the dearest row"
    return row, f"priced as {row}: unknown model {model or '(none)'} ({why})"


def rates(model: str | None) -> tuple[float, float, float, float, float]:
    return PRICES[priced_as(model)[0]]


def cost_usd(model: str | None, *, input_tokens: int, output_tokens: int,
             cache_write_5m: int, cache_write_1h: int, cache_read: int) -> float:
    price_in, price_out, price_5m, price_1h, price_read = rates(model)
    return (input_tokens * price_in + output_tokens * price_out + cache_write_5m * price_5m
            + cache_write_1h * price_1h + cache_read * price_read) / 1_000_000
