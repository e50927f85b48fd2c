from __future__ import annotations

from memory.cues import MAX_TERM_CHARS, MAX_TERMS, clean_terms, cue_text, safe_terms


def test_terms_from_a_model_are_cleaned_capped_and_deduplicated() -> None:
    assert clean_terms(["数据库", "database", " Database ", "数据库"]) == ("数据库", "database")
    assert clean_terms("数据库, database、选型\nPostgres") == ("数据库", "database", "选型", "Postgres")
    assert clean_terms(None) == () and clean_terms(42) == () and clean_terms({"a": 1}) == ()
    assert clean_terms([None, 3, True, ["x"], "", "  ", "\x00", "ok"]) == ("ok",)
    many = clean_terms([f"term{i}" for i in range(100)])
    assert len(many) == MAX_TERMS and many[0] == "term0"
    # A long "term" is no search term: dropped, not cut into one.
    assert clean_terms(["x" * (MAX_TERM_CHARS + 1), "short"]) == ("short",)
    assert clean_terms(["a\x00b\u202ec"]) == ("abc",)


def test_cue_text_holds_the_labels_that_name_something_and_the_terms() -> None:
    assert cue_text("_global", "_general", ()) == ""
    assert cue_text("webshop", "_general", ()) == "webshop"
    assert cue_text("_global", "database", ("数据库",)) == "database\n数据库"
    assert cue_text("web-shop", "_profile", ()) == "web-shop"


def test_safe_terms_keep_no_secret_shape_and_a_credential_none() -> None:
    raw = ["wifi", "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", "password: hunter22", "密码"]
    assert safe_terms(raw) == ("wifi", "密码")
    assert safe_terms(raw, credential=True) == ()
    assert safe_terms({"a": 1}) == () and safe_terms("数据库, database") == ("数据库", "database")
