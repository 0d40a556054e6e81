"""Issue 39: the planner's disk cache cannot run code. A pickle planted in $SPECOPS_HOME/cache (under
the name the next run reads, in the current or the old format) is never loaded: recommend computes
the result again and replaces the file; a truncated or bit-flipped file is recomputed; a key file
others can read, or that is not this user's, is not trusted. Real files; the run after the planting
is a real `specops recommend` subprocess (a fresh process reads the cache; this one keeps results in
memory)."""

from __future__ import annotations

import os
import pickle

RECOMMEND = ("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "-o", "json")


class Boom:
    """Unpickling this writes a marker file: the proof that a planted pickle ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _files(home):
    return sorted((home / "cache").glob("*.cache"))


def test_a_planted_or_corrupt_cache_never_runs_and_is_recomputed_with_the_same_answer(specops_home, tmp_path, cli):
    from specops.planner import diskcache

    r = cli(*RECOMMEND)
    assert r.returncode == 0, r.stderr
    files = _files(specops_home)
    names = [f.name for f in files]
    assert {n.split("-")[0] for n in names} >= {"catalogs", "tree", "priors", "capabilities"}
    marker = tmp_path / "pwned"
    evil = pickle.dumps(Boom(str(marker)))
    for i, f in enumerate(files):
        raw = f.read_bytes()
        if i % 3 == 0:  # a forged file in the current format, and the bare pickle of the old one
            f.write_bytes(diskcache.MAGIC + b"\0" * diskcache.TAG_BYTES + evil)
            f.with_suffix(".pickle").write_bytes(evil)
        elif i % 3 == 1:
            f.write_bytes(raw[:-10] + bytes([raw[-10] ^ 0xFF]) + raw[-9:])  # one flipped byte of the payload
        else:
            f.write_bytes(raw[: len(raw) // 2])  # truncated
    again = cli(*RECOMMEND)
    assert again.returncode == 0 and again.stdout == r.stdout, again.stderr
    assert not marker.exists()
    key = diskcache._cache_key_bytes()
    assert [f.name for f in _files(specops_home)] == names  # recomputed and stored again, signed
    for f in _files(specops_home):
        kind, inputs = f.stem.rsplit("-", 1)
        assert evil not in f.read_bytes() and diskcache._read(f, key, kind, inputs) is not diskcache._MISS, f.name
    assert not list((specops_home / "cache").glob("*.pickle"))  # unsigned files of old releases are removed


def test_a_key_file_others_can_read_or_replace_is_not_trusted(specops_home):
    from specops.planner import diskcache

    key = specops_home / diskcache.KEY_FILE
    calls = []
    assert diskcache.cached("probe", lambda: calls.append(1) or "v") == "v"
    assert diskcache._cache_key_bytes() is not None and oct(key.stat().st_mode & 0o777) == "0o600"
    os.chmod(key, 0o644)
    assert diskcache._cache_key_bytes() is None
    assert diskcache.cached("probe", lambda: calls.append(1) or "v") == "v" and len(calls) == 2  # not read
    key.unlink()
    key.symlink_to(specops_home / "elsewhere")
    assert diskcache._cache_key_bytes() is None
