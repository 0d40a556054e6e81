from specops import __version__


def test_version_prints_package_version(cli):
    r = cli("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"specops {__version__}"


def test_help_lists_commands_and_exits_zero(cli):
    r = cli("--help")
    assert r.returncode == 0
    assert "Usage" in r.stdout


def test_unknown_command_is_a_usage_error_without_traceback(cli):
    r = cli("no-such-command")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
