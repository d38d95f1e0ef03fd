"""A token count that errs high, for capping what hooks put in the model's context without a
tokenizer (the real one, `ctok`, is a benchmark dependency, never imported by a hook).

Rule, calibrated against ctok 4.7 (`benchmarks/context_cost.py` prints both; the unit tests pin
samples): every two lower-case ASCII letters of a word are a token, every capital, digit,
punctuation mark and newline is one, a space is free, every other character two (four outside
the Basic Multilingual Plane). Against ctok's count of the text alone it gives 1.3-1.4x on
this plugin's prose, paths, ids and hashes, 1.1x on bare punctuation, 2.5x on CJK text. The
known miss: letters in no language (`xqzjv bcdfg`, base64: about 0.6x); the context cap also
limits characters, so what the estimate misses cannot grow the text past it.
"""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    tokens = 0
    letters = 0
    for char in text:
        if char.isascii() and char.isalpha():
            if char.isupper():  # capitals split words into more tokens (`SECRET`, base64)
                tokens += 1
            else:
                letters += 1
            continue
        tokens += (letters + 1) // 2
        letters = 0
        if char == " ":
            continue
        if char.isascii():
            tokens += 1
        else:
            tokens += 2 if ord(char) < 0x10000 else 4
    return tokens + (letters + 1) // 2
