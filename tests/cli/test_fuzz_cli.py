"""Issue 26: hypothesis over every command's options and every loader. Whatever is passed, the answer
is an exit code in {0, 1, 2} with no traceback and no internal error (exit 3). Bounded examples so
the whole file runs in well under a minute; nothing is written outside the test's folder."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.inproc import run_main

HOSTILE = ["", "x" * 5000, "\udcff\udcfe", "nan", "inf", "-inf", "1e308", "1e309", "-1", "0", "../..", "a b",
           "::::", "{", "[[[[", "json", "yaml", "table", "web", "eagle3", "H100", "a\x00b", "\x1b[31m", "é",
           "/nonexistent/x", "--", "-", "10" * 30]
URLS = ["http://127.0.0.1:9", "::::", "", "http://[::1", "ftp://127.0.0.1:9", "x" * 5000, "\udcff"]
WRITES = ["out.file", "", "no/such/dir/x", "x" * 300, ".", "\udcff", "fifo.out", "/dev/null", "link.out"]
"""Values for options that write a file: relative, inside the test's working folder (``fifo.out`` is a
FIFO and ``link.out`` a link to one there: writing either must be refused, never block)."""

WRITE_OPTIONS = {"--file", "--save", "--junit", "--out", "--html"}
URL_OPTIONS = {"--endpoint", "--baseline-endpoint", "--prometheus-url", "--endpoint-for"}
NEVER = {"--follow", "--metrics-port", "--help", "--version"}
"""Options left out: --follow waits forever, --metrics-port serves a port."""

FORCED = {"monitor": ["--once"], "deploy": ["--dry-run"], "retrain": ["--dry-run"], "heal": ["--dry-run"],
          "tune": ["--list"], "deployment register": ["--no-check"]}
"""Flags added so that no example starts a loop, an engine, a training run or a tuning campaign."""

SKIP = {"promote", "rollback"}
"""Talk to a Kubernetes API (covered by tests/k8s with an emulator)."""


def _commands():
    import typer

    from specops.cli import main as m

    m._register_all()
    out = []

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        elif " ".join(path) not in SKIP:
            out.append((" ".join(path), cmd))

    walk(typer.main.get_command(m.app), [])
    return out


COMMANDS = _commands()


def _values(opt: str):
    return st.sampled_from(WRITES if opt in WRITE_OPTIONS else URLS if opt in URL_OPTIONS else HOSTILE)


@st.composite
def _argv(draw, cmd):
    args: list[str] = []
    positional: list[str] = []
    for p in cmd.params:
        if p.param_type_name == "argument":
            positional.append(draw(st.sampled_from(HOSTILE)))
            continue
        opt = max(p.opts, key=len)
        if opt in NEVER or not draw(st.booleans()):
            continue
        if getattr(p, "is_flag", False):
            args.append(opt if not p.secondary_opts else draw(st.sampled_from([*p.opts, *p.secondary_opts])))
        else:
            args += [opt, draw(_values(opt))]
    return positional + args


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS])
def test_no_option_value_crashes_a_command(path, tmp_path, monkeypatch):
    cmd = dict(COMMANDS)[path]
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "fifo.out")
    (tmp_path / "link.out").symlink_to(tmp_path / "fifo.out")
    monkeypatch.setenv("SPECOPS_DB_RETRY_SECONDS", "1")
    before = set(os.listdir(tmp_path.parent))

    @settings(max_examples=10, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(_argv(cmd))
    def run(argv):
        code, out, err = run_main(*path.split(), *FORCED.get(path, []), *argv)
        assert code in (0, 1, 2), (argv, code, err[-2000:])
        assert "Traceback" not in err + out and "internal error" not in err, (argv, err[-2000:])

    run()
    assert set(os.listdir(tmp_path.parent)) <= before | {tmp_path.name}  # nothing written beside the folder


# --- loaders ------------------------------------------------------------------------------------------

LOADER_NAMES = ("spec", "checklist", "policy", "runbook", "export", "config")

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
                     max_leaves=20)
_texts = st.one_of(
    _json.map(lambda d: __import__("yaml").safe_dump(d, allow_unicode=True)),
    st.text(max_size=300),
    st.sampled_from(["a: 1\na: 2\n", "[" * 5000, "x: .inf\n", "x: &a 1\ny: *a\n", "{" * 100 + "}" * 100,
                     "name: " + "x" * 5000 + "\n", "\ufeffname: a\n", "- 1\n- 2\n", "!!python/object:os.system x\n",
                     '{"format": "specops-registry", "format_version": 1, "deployments": [{"name": 1e400}]}',
                     '{"format": "specops-registry", "format_version": 1, "targets": [{"name": "t", '
                     '"version": "1", "params_b": 1' + "0" * 5000 + '}]}']),
)


def _load(kind: str, path, home):
    from specops.checks.playbook import load_checklist
    from specops.drift.policy import load_policy
    from specops.drift.runbooks import load_runbook
    from specops.engines.spec import load_spec

    if kind == "export":
        from specops.registry import open_registry
        from specops.registry.transfer import load_export

        return open_registry().import_data(load_export(path), source=str(path))
    if kind == "config":
        from specops.settings import setting

        (home / "config.yaml").write_bytes(path.read_bytes())
        return setting("gpu")
    return {"spec": load_spec, "checklist": load_checklist, "policy": load_policy, "runbook": load_runbook}[kind](
        str(path))


@pytest.mark.parametrize("kind", LOADER_NAMES)
def test_no_file_content_crashes_a_loader(kind, tmp_path, specops_home):
    from specops.errors import SpecopsError

    @settings(max_examples=40, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(_texts)
    def run(text):
        p = tmp_path / f"{kind}.yaml"
        p.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            _load(kind, p, specops_home)
        except SpecopsError as exc:
            assert exc.exit_code in (1, 2)
            assert "\n" not in exc.one_line()
        finally:
            (specops_home / "config.yaml").unlink(missing_ok=True)

    run()
