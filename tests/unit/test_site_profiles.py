"""Site profiles (agent/settings/site_profiles.py): extends and overrides merged with where each
value came from, and every malformed file refused in one line naming the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdiag.agent.base.errors import ConfigError
from clusterdiag.agent.settings.site_profiles import load_site_profiles
from clusterdiag.checks.profiles.profile import load_builtin


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(text)
    return path


def test_a_chain_of_extends_merges_overrides_and_says_where_each_came_from(
        tmp_path: Path) -> None:
    base = _write(tmp_path, "oem-h100", "extends: dgx-h100\ncompute_hcas: 8\n"
                  "hca_link_layer: Ethernet\nhca_rate_gbps: 200\n"
                  "thresholds: {gpu.temperature: {min_slowdown_margin_c: 8}}\n")
    top = _write(tmp_path, "rack7", "extends: oem-h100\ngpu_count: 7\n"
                 "gpu_models: ['NVIDIA H100 80GB HBM3', 'NVIDIA H100']\n"
                 "thresholds: {gpu.xid: {window_s: 3600}}\n")
    sites = load_site_profiles(tmp_path)
    rack7 = sites["rack7"].profile
    builtin = load_builtin("dgx-h100")
    assert rack7.name == "rack7"
    assert rack7.gpu_count == 7
    assert rack7.gpu_models == ("NVIDIA H100 80GB HBM3", "NVIDIA H100")
    assert rack7.hca_link_layer == "Ethernet"
    assert rack7.hca_rate_gbps == 200
    assert rack7.nvlinks_per_gpu == builtin.nvlinks_per_gpu == 18
    assert rack7.thresholds == {**builtin.thresholds,
                                "gpu.temperature": {"min_slowdown_margin_c": 8},
                                "gpu.xid": {"window_s": 3600}}
    origins = sites["rack7"].origins
    assert origins["gpu_count"] == str(top)
    assert origins["hca_link_layer"] == str(base)
    assert origins["nvlinks_per_gpu"] == "built-in dgx-h100"
    assert sites["rack7"].extends == "oem-h100"


def test_without_extends_a_profile_starts_empty(tmp_path: Path) -> None:
    _write(tmp_path, "pcie-box", "gpu_count: 2\n")
    site = load_site_profiles(tmp_path)["pcie-box"]
    assert site.profile.gpu_count == 2
    assert site.profile.nvlinks_per_gpu == 0
    assert site.origins["nvlinks_per_gpu"] == "default"


def test_an_extra_file_is_loaded_beside_the_directory(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    _write(tmp_path / "dir", "common", "extends: dgx-h100\nhca_rate_gbps: 200\n")
    extra = _write(tmp_path, "mine", "extends: common\ngpu_count: 4\n")
    sites = load_site_profiles(tmp_path / "dir", extra)
    assert sites["mine"].profile.hca_rate_gbps == 200
    assert sites["mine"].profile.gpu_count == 4


@pytest.mark.parametrize(("files", "needle"), [
    ({"a": "extends: dgx-h100\ngpu_cont: 8\n"},
     "unknown key 'gpu_cont' (did you mean 'gpu_count'?)"),
    ({"a": "gpu_count: eight\n"}, "key 'gpu_count' must be an integer or null, got str 'eight'"),
    ({"a": "gpu_count: true\n"}, "key 'gpu_count' must be an integer"),
    ({"a": "hca_rate_gbps: -200\n"}, "key 'hca_rate_gbps' must not be negative"),
    ({"a": "hca_link_layer: RoCE\n"}, "key 'hca_link_layer' must be InfiniBand or Ethernet"),
    ({"a": "gpu_models: H100\n"}, "key 'gpu_models' must be a list"),
    ({"a": "gpu_models: [1, 2]\n"}, "key 'gpu_models' must be a list of strings"),
    ({"a": "extends: [dgx-h100]\n"}, "key 'extends' must be a profile name"),
    ({"a": "extends: dgx-h10\n"},
     "key 'extends': unknown profile 'dgx-h10' (did you mean 'dgx-h100'?)"),
    ({"a": "extends: b\n", "b": "extends: a\n"}, "key 'extends': a cycle (a -> b -> a)"),
    ({"a": "extends: a\n"}, "key 'extends': a cycle (a -> a)"),
    ({"a": "- 1\n"}, "top level must be a mapping"),
    ({"a": "key: [unclosed\n"}, "malformed YAML"),
    ({"dgx-h100": "gpu_count: 7\n"}, "'dgx-h100' is a built-in profile"),
])
def test_malformed_profiles_are_one_line_naming_file_and_key(
        tmp_path: Path, files: dict[str, str], needle: str) -> None:
    for name, text in files.items():
        _write(tmp_path, name, text)
    with pytest.raises(ConfigError) as caught:
        load_site_profiles(tmp_path)
    message = str(caught.value)
    assert needle in message
    assert message.startswith(f"profile {tmp_path}/")
    assert "\n" not in message


def test_nvlinks_per_gpu_and_the_recognition_keys_can_be_overridden(tmp_path: Path) -> None:
    """nvlinks_per_gpu is a plain count (it was refused as "must be a string or null");
    the compute-NIC recognition keys are lists of strings."""
    path = tmp_path / "site.yaml"
    path.write_text("extends: hgx-h100-8gpu\nnvlinks_per_gpu: 12\n"
                    "compute_netdevs: [\"ibp*\"]\ncompute_models: [MT4129]\n")
    site = load_site_profiles(tmp_path / "none", path)["site"]
    assert site.profile.nvlinks_per_gpu == 12
    assert site.profile.compute_netdevs == ("ibp*",)
    assert site.profile.compute_models == ("MT4129",)
    path.write_text("extends: hgx-h100-8gpu\nnvlinks_per_gpu: null\n")
    with pytest.raises(ConfigError, match="key 'nvlinks_per_gpu' must be an integer"):
        load_site_profiles(tmp_path / "none", path)


_HBM = 'unit: GB/s, expected: 1450, floor: 952.5, source: "site measurement"'


@pytest.mark.parametrize(("qualify", "needle"), [
    ("hbmm: {" + _HBM + "}", "unknown key 'qualify.hbmm' (did you mean 'qualify.hbm'?)"),
    ("hbm: {" + _HBM + ", flor: 3}",
     "unknown key 'qualify.hbm.flor' (did you mean 'qualify.hbm.floor'?)"),
    ('hbm: {unit: TB/s, floor: 1, source: "x"}',
     "key 'qualify.hbm.unit' must be 'GB/s', the unit nvbandwidth prints, got 'TB/s'"),
    ('hbm: {floor: 900, source: "x"}', "key 'qualify.hbm.unit' must be 'GB/s'"),
    ('nic: {unit: GB/s, floor: 45, source: "x"}',
     "key 'qualify.nic.unit' must be 'Gb/s', the unit ib_write_bw prints"),
    ('hbm: {unit: GB/s, floor: 0, source: "x"}',
     "key 'qualify.hbm.floor' must be a positive finite number, got 0"),
    ('hbm: {unit: GB/s, expected: -1450, source: "x"}',
     "key 'qualify.hbm.expected' must be a positive finite number"),
    ('hbm: {unit: GB/s, expected: .inf, source: "x"}', "must be a finite number"),
    ('hbm: {unit: GB/s, floor: true, source: "x"}',
     "key 'qualify.hbm.floor' must be a positive finite number, got True"),
    ('hbm: {unit: GB/s, floor: fast, source: "x"}',
     "key 'qualify.hbm.floor' must be a positive finite number"),
    ('hbm: {unit: GB/s, expected: 900, floor: 950, source: "x"}',
     "key 'qualify.hbm.floor' (950) is above 'qualify.hbm.expected' (900)"),
    ("hbm: {unit: GB/s, floor: 950}", "key 'qualify.hbm.source' must say where"),
    ('hbm: {unit: GB/s, floor: 950, source: "  "}', "key 'qualify.hbm.source' must say where"),
    ('hbm: {unit: GB/s, source: "x"}', "key 'qualify.hbm' needs an expected figure, a floor"),
    ('dcgm: {unit: "", floor: 1, source: "x"}', "key 'qualify.dcgm': dcgm has no figure"),
    ("hbm: 1450", "key 'qualify' must map names to mappings"),
])
def test_a_bad_qualify_entry_is_one_line_naming_its_key(tmp_path: Path, qualify: str,
                                                        needle: str) -> None:
    """A site profile's qualify: keys are the declared active tests, in their tool's unit,
    with positive finite numbers (floor <= expected) and a source."""
    _write(tmp_path, "mine", "extends: dgx-h100\nqualify:\n  " + qualify + "\n")
    with pytest.raises(ConfigError) as caught:
        load_site_profiles(tmp_path)
    message = str(caught.value)
    assert needle in message
    assert message.startswith(f"profile {tmp_path}/mine.yaml: ")
    assert "\n" not in message


def test_a_good_qualify_entry_overrides_its_base(tmp_path: Path) -> None:
    _write(tmp_path, "mine", "extends: dgx-h100\nqualify:\n  hbm: {" + _HBM + "}\n")
    mine = load_site_profiles(tmp_path)["mine"].profile
    assert mine.qualify["hbm"]["source"] == "site measurement"
    assert mine.qualify["allreduce"] == load_builtin("dgx-h100").qualify["allreduce"]


def test_every_built_in_profile_qualify_entry_is_valid() -> None:
    """The shipped profiles pass the rule a site's must pass (load_builtin refuses one that
    does not, as the next test shows)."""
    from clusterdiag.checks.profiles.profile import builtin_names, qualify_problem

    for name in builtin_names():
        assert qualify_problem(load_builtin(name).qualify) is None, name


def test_a_built_in_profile_with_a_bad_qualify_entry_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from clusterdiag.checks.profiles import profile as profile_module

    bad = {**profile_module.PROFILES["dgx-h100"],
           "qualify": {"hbm": {"unit": "GB/s", "floor": 1905, "expected": 1450,
                               "source": "x"}}}
    monkeypatch.setitem(profile_module.PROFILES, "dgx-h100", bad)
    profile_module.load_builtin.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"profile dgx-h100: key 'qualify\.hbm\.floor' "
                                             r"\(1905\) is above"):
            load_builtin("dgx-h100")
    finally:
        monkeypatch.undo()
        profile_module.load_builtin.cache_clear()
