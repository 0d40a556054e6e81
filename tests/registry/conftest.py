"""Registry fixtures: real model folders, real SQLite files, a real PostgreSQL server.

``db_url`` is parametrized over ``sqlite`` (a file in the test's SPECOPS_HOME) and ``postgres``
(marked ``postgres``): a session-wide database on the local Debian cluster, started here when it is
not running (as root: ``pg_ctlcluster``; role ``root`` created when missing), with one fresh schema
per test selected through the connection's ``search_path``. The database is dropped afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

WORDS = ("def return import class self for in if else while yield lambda with as try except "
         "print range len list dict set tuple open read write the a of to and is").split()


def build_tokenizer(folder: Path, extra_words: tuple[str, ...] = ()) -> int:
    """A real WordLevel tokenizer (trained with `tokenizers` on a few lines); returns its vocab size."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    lines = [" ".join(WORDS[i:i + 6] + list(extra_words)) for i in range(0, len(WORDS), 3)]
    tok.train_from_iterator(lines, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[BOS]", "[EOS]"]))
    tok.save(str(folder / "tokenizer.json"))
    return tok.get_vocab_size()


def build_model(folder: Path, *, arch: str = "LlamaForCausalLM", hidden: int = 32, layers: int = 2,
                vocab: int | None = None, seed: int = 0, extra_words: tuple[str, ...] = (),
                config_extra: dict | None = None, shards: int = 1, with_tokenizer: bool = True) -> Path:
    """A Hugging Face-shaped folder: config.json, tokenizer.json, safetensors shard(s) (real tensors)."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    tok_vocab = build_tokenizer(folder, extra_words) if with_tokenizer else 64
    vocab = vocab or tok_vocab
    cfg = {"architectures": [arch], "model_type": "llama", "hidden_size": hidden, "num_hidden_layers": layers,
           "vocab_size": vocab, "torch_dtype": "float32", **(config_extra or {})}
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    g = torch.Generator().manual_seed(seed)
    for i in range(shards):
        tensors = {f"model.layers.{i}.weight": torch.randn(hidden, hidden, generator=g),
                   "model.embed_tokens.weight": torch.randn(vocab, hidden, generator=g)}
        name = "model.safetensors" if shards == 1 else f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        save_file(tensors, str(folder / name))
    return folder


@pytest.fixture
def models(tmp_path):
    """Factory: models("name", **build_model kwargs) -> folder under tmp_path/models."""
    def make(name: str, **kw) -> Path:
        return build_model(tmp_path / "models" / name, **kw)
    return make


# --- PostgreSQL ---------------------------------------------------------------------------------

def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)


def _as_postgres(argv: list[str]) -> list[str]:
    return argv if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--", *argv]


def _start_cluster() -> None:
    if not shutil.which("pg_lsclusters"):
        pytest.fail("PostgreSQL is not installed. To fix: run scripts/services.sh (as root) or "
                    "apt-get install postgresql; or deselect with -m 'not postgres'")
    lines = _run(["pg_lsclusters", "--no-header"]).stdout.split()
    if len(lines) < 4:
        pytest.fail("no PostgreSQL cluster found. To fix: pg_createcluster 15 main")
    version, cluster, status = lines[0], lines[1], lines[3]
    if status != "online":
        r = _run(["pg_ctlcluster", version, cluster, "start"])
        if r.returncode != 0:
            pytest.fail(f"could not start PostgreSQL {version}/{cluster}: {r.stderr.strip()}")
    for _ in range(50):
        if _run(["pg_isready", "-q"]).returncode == 0:
            break
        time.sleep(0.2)
    if os.geteuid() == 0:
        me = "root"
        exists = _run(_as_postgres(["psql", "-tAc", f"SELECT 1 FROM pg_roles WHERE rolname='{me}'"])).stdout.strip()
        if exists != "1":
            _run(_as_postgres(["psql", "-qc", f"CREATE ROLE {me} SUPERUSER LOGIN"]))


@pytest.fixture(scope="session")
def postgres_database():
    """A uniquely named database on the local cluster (dropped at the end); yields its base URL."""
    _start_cluster()
    name = f"specops_test_{uuid.uuid4().hex[:10]}"
    r = _run(["createdb", name])
    if r.returncode != 0:
        pytest.fail(f"createdb {name} failed: {r.stderr.strip()}")
    yield f"postgresql+psycopg:///{name}?host=/var/run/postgresql"
    _run(["dropdb", "--force", "--if-exists", name])


def _pg_schema_url(base: str) -> str:
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    dbname = base.split("///")[1].split("?")[0]
    with psycopg.connect(dbname=dbname, host="/var/run/postgresql", autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{base}&options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, specops_home):
    """A fresh, empty registry URL: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{specops_home / 'specops.db'}"
    return _pg_schema_url(request.getfixturevalue("postgres_database"))


@pytest.fixture
def reg(db_url):
    from specops.registry import open_registry

    r = open_registry(db_url)
    yield r
    r.close()
