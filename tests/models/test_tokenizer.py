"""The offline tokenizer's cache file, written by two processes at once."""

from __future__ import annotations


def test_two_writers_of_the_tokenizer_cache_at_once_both_succeed(tmp_path, monkeypatch):
    """pytest's two workers on a machine with no cache yet both trained the tokenizer and
    saved it to one shared `bpe-*.tmp`: the first rename took the second's file and the
    second's collection failed with FileNotFoundError. Here the second writer runs whole in
    the middle of the first's save (after its bytes, before its rename)."""
    from tokenizers import Tokenizer

    from infermeter.models import tokenizer as tk

    monkeypatch.setenv("INFERMETER_CACHE", str(tmp_path))
    real_save = Tokenizer.save
    saved: list[str] = []

    def save_then_race(self, path, *args, **kwargs):
        real_save(self, path, *args, **kwargs)
        saved.append(path)
        if len(saved) == 1:  # the other process, start to finish, before this one renames
            tk.builtin_tokenizer()

    monkeypatch.setattr(Tokenizer, "save", save_then_race)
    first = tk.builtin_tokenizer()
    assert len(saved) == 2 and saved[0] != saved[1]
    (cached,) = (tmp_path / "tokenizers").iterdir()  # one file, no temporary left behind
    assert cached.suffix == ".json"
    assert first.encode("hello world") == tk.builtin_tokenizer().encode("hello world")
