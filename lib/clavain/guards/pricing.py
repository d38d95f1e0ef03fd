"""What tokens cost, per model: input, output, cache reads, and the two cache-write rates (a
1-hour cache write costs 2x input, a 5-minute one 1.25x; pricing them alike under-reports).

USD per million tokens. Rows up to the 5 family from Anthropic's pricing page
(platform.claude.com/docs/en/about-claude/pricing); the 5.5 rows from public price trackers
(checked 2026-11-23). A model is matched by the longest id prefix; an unknown one by its family
(opus, sonnet, haiku), priced at that family's newest known rate; anything else as opus.
A cloud provider's prefix (`us.anthropic.`, `anthropic.`) is ignored.
"""

from __future__ import annotations

# prefix: (input, output, cache write 5 min, cache write 1 h, cache read)
PRICES = {
    "claude-fable-5-1": (10.0, 50.0, 12.5, 20.0, 0.25),
    "claude-fable-5": (10.0, 50.0, 12.5, 20.0, 1.0),
    "claude-mythos-5-1": (10.0, 50.0, 12.5, 20.0, 0.25),
    "claude-mythos-5": (10.0, 50.0, 12.5, 20.0, 1.0),
    "claude-opus-5-5": (4.0, 20.0, 5.0, 8.0, 0.20),
    "claude-opus-5": (5.0, 25.0, 6.25, 10.0, 0.50),
    "claude-opus-4-5": (5.0, 25.0, 6.25, 10.0, 0.50),
    "claude-opus-4-6": (5.0, 25.0, 6.25, 10.0, 0.50),
    "claude-opus-4-7": (5.0, 25.0, 6.25, 10.0, 0.50),
    "claude-opus-4-8": (5.0, 25.0, 6.25, 10.0, 0.50),
    "claude-opus-4": (15.0, 75.0, 18.75, 30.0, 1.50),
    "claude-3-opus": (15.0, 75.0, 18.75, 30.0, 1.50),
    "claude-sonnet-5-5": (2.0, 10.0, 2.5, 4.0, 0.10),
    "claude-sonnet-5": (2.0, 10.0, 2.5, 4.0, 0.20),
    "claude-sonnet-4": (3.0, 15.0, 3.75, 6.0, 0.30),
    "claude-3-7-sonnet": (3.0, 15.0, 3.75, 6.0, 0.30),
    "claude-3-5-sonnet": (3.0, 15.0, 3.75, 6.0, 0.30),
    "claude-haiku-5-5": (0.10, 0.50, 0.125, 0.20, 0.01),
    "claude-haiku-4-5": (1.0, 5.0, 1.25, 2.0, 0.10),
    "claude-3-5-haiku": (0.80, 4.0, 1.0, 1.6, 0.08),
    "claude-3-haiku": (0.25, 1.25, 0.30, 0.50, 0.03),
}
FAMILY = {"opus": "claude-opus-5-5", "sonnet": "claude-sonnet-5-5", "haiku": "claude-haiku-5-5"}
FALLBACK = "claude-opus-5-5"


def rates(model: str | None) -> tuple[float, float, float, float, float]:
    name = (model or "").lower()
    # Bedrock and Vertex ids carry a prefix (`us.anthropic.claude-sonnet-4-5…`).
    name = name[name.find("claude-"):] if "claude-" in name else name
    matches = [prefix for prefix in PRICES if name.startswith(prefix)]
    if matches:
        return PRICES[max(matches, key=len)]
    for family, row in FAMILY.items():
        if family in name:
            return PRICES[row]
    return PRICES[FALLBACK]


def cost_usd(model: str | None, *, input_tokens: int, output_tokens: int,
             cache_write_5m: int, cache_write_1h: int, cache_read: int) -> float:
    price_in, price_out, price_5m, price_1h, price_read = rates(model)
    return (input_tokens * price_in + output_tokens * price_out + cache_write_5m * price_5m
            + cache_write_1h * price_1h + cache_read * price_read) / 1_000_000
