import pytest

from clavain.textio import BadText, check, decode, load_json, scrub


def test_decode_drops_a_bom_and_names_bad_bytes() -> None:
    assert decode("\ufeffhé".encode(), "stdin") == "hé"
    with pytest.raises(BadText, match=r"plan\.json: not UTF-8 text \(byte 1"):
        decode(b"a\xff", "plan.json")
    assert decode(b"a\xff", "log", lenient=True) == "a\ufffd"


def test_check_refuses_surrogate_escaped_argv() -> None:
    bad = b"task-\xff".decode("utf-8", "surrogateescape")
    with pytest.raises(BadText, match="--parent: not UTF-8 text"):
        check(bad, "--parent")
    assert check("ok é", "--title") == "ok é"
    assert scrub(bad) == "task-?"
    assert scrub("fine") == "fine"


def test_load_json_bom_depth_and_garbage() -> None:
    assert load_json('\ufeff{"a": 1}', "f") == {"a": 1}
    with pytest.raises(BadText, match="nested too deeply"):
        load_json("[" * 100_000 + "]" * 100_000, "f")
    with pytest.raises(BadText, match="f: not valid JSON"):
        load_json("{", "f")
