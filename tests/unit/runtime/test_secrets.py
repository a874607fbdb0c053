"""The one reader of a secret a setting names (services/runtime/secrets.py): a variable or a file, whitespace
dropped, and a file's problem said without its content."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.runtime.secrets import OpenToOthers, SecretFileError, Unreadable, from_env, from_file


def test_a_variable_is_read_without_surrounding_whitespace_and_is_empty_when_unset(monkeypatch: pytest.MonkeyPatch):
    assert from_env("TOKEN", {"TOKEN": "  abc\n"}) == "abc"
    assert from_env("TOKEN", {}) == ""
    monkeypatch.setenv("SECRET_READER_TEST_VALUE", "\tfrom-the-process ")
    assert from_env("SECRET_READER_TEST_VALUE") == "from-the-process"


def test_a_file_is_read_as_utf8_without_surrounding_whitespace(tmp_path: Path):
    path = tmp_path / "token"
    path.write_text("  s3cr\u00e9t\n\n", encoding="utf-8")
    assert from_file(path) == "s3cr\u00e9t"
    assert from_file(str(path)) == "s3cr\u00e9t"


def test_a_missing_file_is_unreadable_in_the_operating_systems_words(tmp_path: Path):
    with pytest.raises(Unreadable) as caught:
        from_file(tmp_path / "absent")
    assert caught.value.reason == "No such file or directory"
    assert isinstance(caught.value.error, FileNotFoundError) and caught.value.path == tmp_path / "absent"
    assert isinstance(caught.value, SecretFileError)


def test_a_folder_is_unreadable(tmp_path: Path):
    with pytest.raises(Unreadable) as caught:
        from_file(tmp_path)
    assert caught.value.reason == "Is a directory"


def test_bytes_that_are_not_utf8_are_unreadable_and_not_repeated(tmp_path: Path):
    path = tmp_path / "token"
    path.write_bytes(b"\xff\xfesecret")
    with pytest.raises(Unreadable) as caught:
        from_file(path)
    assert caught.value.reason == "not UTF-8 text" and type(caught.value.error).__name__ == "UnicodeDecodeError"
    assert "secret" not in str(caught.value)


def test_an_owner_only_file_open_to_group_or_others_is_refused(tmp_path: Path):
    path = tmp_path / "token"
    path.write_text("secret")
    path.chmod(0o640)
    with pytest.raises(OpenToOthers) as caught:
        from_file(path, owner_only=True)
    assert caught.value.mode & 0o777 == 0o640 and "-rw-r-----" in str(caught.value)
    path.chmod(0o604)
    with pytest.raises(OpenToOthers):
        from_file(path, owner_only=True)
    path.chmod(0o600)
    assert from_file(path, owner_only=True) == "secret"


def test_without_owner_only_the_mode_is_not_checked(tmp_path: Path):
    path = tmp_path / "url"
    path.write_text("redis://127.0.0.1:6379/0\n")
    path.chmod(0o644)
    assert from_file(path) == "redis://127.0.0.1:6379/0"
