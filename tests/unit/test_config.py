from __future__ import annotations

from pathlib import Path

import pytest

from clusterdiag import checks
from clusterdiag.agent.base.errors import ConfigError
from clusterdiag.agent.settings.config import Config, load_config, qualify_runs, qualify_tools

CATALOG = {spec.id: spec.schema for spec in checks.REGISTRY.values()}


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_config(path, CATALOG)


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.yaml", CATALOG)


def test_malformed_yaml_gives_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"malformed YAML at line \d+"):
        _load(tmp_path, "budget_s: 3\nchecks: [unclosed: {\nx: 1\n")


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'budget'.*did you mean 'budget_s'"):
        _load(tmp_path, "budget: 3\n")


def test_unknown_nested_key_is_named_with_its_section(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'prolog\.drian'.*'prolog\.drain'"):
        _load(tmp_path, "prolog:\n  drian: false\n")


def test_wrong_type_says_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'budget_s' must be a number, got str"):
        _load(tmp_path, "budget_s: soon\n")


def test_bool_is_not_a_number(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="budget_s"):
        _load(tmp_path, "budget_s: true\n")


def test_unknown_check_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"checks\.host\.dsk.*did you mean 'checks\.host\.disk'"):
        _load(tmp_path, "checks:\n  host.dsk: {enabled: false}\n")


def test_check_parameter_types_follow_their_defaults(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"checks\.host\.disk\.min_free_pct' must be a number"):
        _load(tmp_path, "checks:\n  host.disk: {min_free_pct: lots}\n")


def test_precedence_defaults_profile_config(tmp_path: Path) -> None:
    config = _load(tmp_path, "checks:\n  host.disk: {min_free_pct: 12}\n")
    defaults = {"min_free_pct": 5, "paths": ["/"]}
    params = config.check_params("host.disk", defaults, {"min_free_pct": 8, "paths": ["/x"]})
    assert params == {"min_free_pct": 12, "paths": ["/x"]}
    assert config.enabled("host.disk")


def test_disabled_check(tmp_path: Path) -> None:
    config = _load(tmp_path, "checks:\n  host.disk: {enabled: false}\n")
    assert not config.enabled("host.disk")


def test_empty_file_is_defaults(tmp_path: Path) -> None:
    config = _load(tmp_path, "")
    assert config.data["profile"] == "auto"
    assert config.section("prolog")["budget_s"] == 8.0


# Every qualify setting has a range: our own settings must never read as slow or hung
# hardware (a fail_pct of 0 judged run-to-run noise a fault and drained every node).
@pytest.mark.parametrize(("text", "said"), [
    ("fail_pct: 0", "key 'qualify.fail_pct' must be from 1 to 99, got 0"),
    ("fail_pct: 0.1", "key 'qualify.fail_pct' must be from 1 to 99, got 0.1"),
    ("fail_pct: -50", "key 'qualify.fail_pct' must be from 1 to 99, got -50"),
    ("fail_pct: 100", "key 'qualify.fail_pct' must be from 1 to 99"),
    ("fail_pct: .nan", "key 'qualify.fail_pct' must be a finite number"),
    ("fail_pct: ten", "key 'qualify.fail_pct' must be a number, got str"),
    ("warn_pct: 0", "key 'qualify.warn_pct' must be from 1 to 99, got 0"),
    ("fail_pct: 3", "key 'qualify.fail_pct' (3) must be at least 'qualify.warn_pct' (5)"),
    ("warn_pct: 20", "key 'qualify.warn_pct' (20) must be at most 'qualify.fail_pct' (10)"),
    ("{warn_pct: 20, fail_pct: 15}",
     "key 'qualify.warn_pct' (20) must be at most 'qualify.fail_pct' (15)"),
    ("drift_pct: 0", "key 'qualify.drift_pct' must be from 1 to 99, got 0"),
    ("min_peers: 2", "key 'qualify.min_peers' must be from 3 to 100000, got 2"),
    ("min_peers: 3.5", "key 'qualify.min_peers' must be an integer, got float"),
    ("budget_s: 5", "key 'qualify.budget_s' must be from 60 to 604800, got 5"),
    ("burn_s: 0.5", "key 'qualify.burn_s' must be from 10 to 86400, got 0.5"),
    ("parallel_nodes: 0", "key 'qualify.parallel_nodes' must be from 1 to 100000, got 0"),
    ("repeat: 1", "key 'qualify.repeat' must be true/false"),
    ("srun_mpi: 'pmix; rm -rf /'", "key 'qualify.srun_mpi' must be auto"),
    ("srun_mpi: PMIx", "key 'qualify.srun_mpi' must be auto"),
    ("srun_mpi: ''", "key 'qualify.srun_mpi' must be auto"),
    ("min_peer: 5", "unknown key 'qualify.min_peer' (did you mean 'qualify.min_peers'?)"),
    ("deadline_s: {nvbandwith: 600}",
     "unknown key 'qualify.deadline_s.nvbandwith' (did you mean "
     "'qualify.deadline_s.nvbandwidth'?)"),
    ("deadline_s: {hbm: 600}",
     "key 'qualify.deadline_s.hbm': hbm runs in the nvbandwidth run: set "
     "'qualify.deadline_s.nvbandwidth'"),
    ("deadline_s: {pairs: 1.5}",
     "key 'qualify.deadline_s.pairs' must be from 60 to 86400 seconds, got 1.5"),
    ("deadline_s: {inventory: 1}",
     "key 'qualify.deadline_s.inventory' must be from 5 to 86400 seconds, got 1"),
    ("deadline_s: {allreduce: soon}", "key 'qualify.deadline_s.allreduce' must be a number"),
    ("deadline_s: [1]", "key 'qualify.deadline_s' must be a mapping"),
    ("tools: {gpu_brun: /opt/gpu_burn}",
     "unknown key 'qualify.tools.gpu_brun' (did you mean 'qualify.tools.gpu_burn'?)"),
    ("tools: {gpu_burn: bin/gpu_burn}", "key 'qualify.tools.gpu_burn' must be an absolute path"),
    ("tools: {gpu_burn_compare: compare.fatbin}",
     "key 'qualify.tools.gpu_burn_compare' must be an absolute path"),
    ("tools: {nvbandwidth: ''}", "key 'qualify.tools.nvbandwidth' must be a path"),
    ("tools: {nvbandwidth: 3}", "key 'qualify.tools.nvbandwidth' must be a path"),
    ('tools: {ibstat: "/usr/sbin/ibstat\\0x"}', "key 'qualify.tools.ibstat' is no path"),
    ("rails: {mlx5_0: -1}", "key 'qualify.rails.mlx5_0' must be a GPU index from 0 to 255"),
    ("rails: {mlx5_0: gpu3}", "key 'qualify.rails.mlx5_0' must be a GPU index"),
    ("rails: {mlx5_0: true}", "key 'qualify.rails.mlx5_0' must be a GPU index"),
    ("rails: {'mlx5 0': 1}", "key 'qualify.rails.mlx5 0': an RDMA device name"),
])
def test_every_qualify_setting_is_range_checked(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, "qualify:\n  " + text + "\n" if not text.startswith("{")
              else "qualify: " + text + "\n")
    message = str(caught.value)
    assert said in message
    assert message.startswith(f"config {tmp_path}/config.yaml: ")
    assert "\n" not in message


def test_qualify_defaults_and_what_a_site_may_set(tmp_path: Path) -> None:
    assert Config().section("qualify")["srun_mpi"] == "auto"
    assert Config().section("qualify")["drift_pct"] == 10.0
    config = _load(tmp_path, "qualify:\n  warn_pct: 10\n  fail_pct: 10\n  srun_mpi: pmi2\n"
                   "  deadline_s: {nvbandwidth: 900, pairs: 120, inventory: 5}\n"
                   "  tools: {gpu_burn: /opt/gpu-burn/gpu_burn, all_reduce_perf: "
                   "all_reduce_perf_mpi, gpu_burn_compare: /opt/gpu-burn/compare.fatbin, "
                   "ibstat: /usr/sbin/ibstat, ib_write_bw: /usr/bin/ib_write_bw, dcgmi: dcgmi}\n"
                   "  rails: {mlx5_0: 0, mlx5_10: host}\n")
    qualify = config.section("qualify")
    assert qualify["srun_mpi"] == "pmi2"
    assert qualify["rails"] == {"mlx5_0": 0, "mlx5_10": "host"}
    assert qualify["deadline_s"]["nvbandwidth"] == 900


def test_the_qualify_names_come_from_the_declarations() -> None:
    """deadline_s names every run a node or cross test makes (the four nvbandwidth tests
    share one), tools every program a test or its fallback runs."""
    from clusterdiag.checks.qualify.active import ACTIVE_TESTS, FALLBACKS

    runs = qualify_runs()
    for test in ACTIVE_TESTS.values():
        assert runs[test.id] == test.invocation.name
        assert runs[test.invocation.name] == test.invocation.name
    assert set(qualify_tools()) == {t.invocation.program for t in ACTIVE_TESTS.values()} | {
        f.program for f in FALLBACKS.values()} | {"gpu_burn_compare", "ibstat"}


def test_the_device_probe_configures_only_tools_qualify_takes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/device_probe.py writes a config for the real GPU run: a name qualify does not
    take there would stop that run at exit 2."""
    import importlib.util
    import sys

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location("device_probe", REPO / "bench/device_probe.py")
    assert spec is not None
    assert spec.loader is not None
    probe = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "device_probe", probe)  # its dataclasses look it up
    spec.loader.exec_module(probe)
    assert set(probe.QUALIFY_TOOLS) == set(qualify_tools())


def test_the_health_section_has_its_defaults_ranges_and_did_you_mean(tmp_path: Path) -> None:
    assert _load(tmp_path, "").section("health") == {
        "strikes": 3, "strike_window_s": 604800.0, "fleet_event_share": 0.1,
        "fleet_event_window_s": 600.0, "breaker_share": 0.2, "validation_tries": 3,
        "on_validation_error": "recheck", "hold_down_s": {},
        "medians_max_age_s": 2592000.0}
    with pytest.raises(ConfigError, match=r"'health\.strike'.*did you mean 'health\.strikes'"):
        _load(tmp_path, "health:\n  strike: 2\n")
    with pytest.raises(ConfigError, match=r"'health\.breaker_share'"):
        _load(tmp_path, "health:\n  breaker_share: 1.5\n")
    with pytest.raises(ConfigError, match=r"'health\.strikes'"):
        _load(tmp_path, "health:\n  strikes: 0\n")
