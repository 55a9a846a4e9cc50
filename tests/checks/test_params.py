"""Check parameters (checks/core/params.py): each check's frozen dataclass is the one place of
its defaults, types, bounds and docs; the config's ``checks:`` and a site profile's
``thresholds:`` are validated against the schema derived from it (carried by the
manifest), and the runner binds the merged values into it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterdiag.agent.base.errors import ConfigError
from clusterdiag.agent.cli.checks import checks_group
from clusterdiag.agent.model.record import is_frozen, record
from clusterdiag.agent.run.runner import RunOptions, bound_params, evaluate
from clusterdiag.agent.settings.config import Config, load_config
from clusterdiag.agent.settings.site_profiles import load_site_profiles
from clusterdiag.checks import REGISTRY
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.core.index import schemas
from clusterdiag.checks.core.params import (
    NoParams,
    Params,
    ParamsError,
    bind,
    param,
    parameters,
    schema_of,
)
from clusterdiag.checks.core.registry import CheckContext, check
from clusterdiag.checks.profiles.profile import builtin_names, load_builtin, load_profile
from tests.checks.gpu.factory import NOW, make_snap


def test_every_check_declares_a_frozen_dataclass_with_a_doc_per_parameter() -> None:
    for check_id, spec in REGISTRY.items():
        assert issubclass(spec.params_type, Params), check_id
        assert is_frozen(spec.params_type), check_id
        for f in dataclasses.fields(spec.params_type):  # type: ignore[arg-type]
            assert f.metadata["doc"].strip(), (check_id, f.name)
        assert set(spec.schema) == set(spec.params), check_id
    assert sum(bool(spec.params) for spec in REGISTRY.values()) >= 30


def test_every_checks_parameters_share_the_records_methods() -> None:
    """Declared with ``@parameters``, a frozen record: no method compiled per class, every
    class's __init__, __eq__, __hash__, __repr__ and __setattr__ the same function."""
    shared = ("__init__", "__eq__", "__hash__", "__repr__", "__setattr__")
    for check_id, spec in REGISTRY.items():
        assert all(getattr(spec.params_type, name) is getattr(NoParams, name)
                   for name in shared), check_id


@parameters
class _Pair(Params):
    warn: int = param(1, doc="warn at")
    fail: int = param(5, doc="fail at")


@parameters
class _OtherPair(Params):
    warn: int = param(1, doc="warn at")
    fail: int = param(5, doc="fail at")


def test_the_shared_methods_behave_as_a_frozen_dataclass_s() -> None:
    assert _Pair() == _Pair(1, 5)
    assert _Pair(fail=6) != _Pair()
    assert _Pair() != _OtherPair()  # the same values in another check's class
    assert hash(_Pair()) == hash(_Pair(1, 5))
    assert len({_Pair(), _Pair(1, 5), _Pair(2, 5)}) == 2
    assert repr(_Pair(fail=6)) == "_Pair(warn=1, fail=6)"
    assert repr(NoParams()) == "NoParams()"
    with pytest.raises(dataclasses.FrozenInstanceError):
        _Pair().warn = 2  # type: ignore[misc]
    assert dataclasses.replace(_Pair(), warn=3) == _Pair(3, 5)


def test_a_dict_of_defaults_is_refused_at_registration() -> None:
    with pytest.raises(TypeError, match="declared @parameters"):
        check("test.dict_params", needs=(), remedy="-",
              params={"max": 1})(lambda ctx: iter(()))  # type: ignore[arg-type]
    assert "test.dict_params" not in REGISTRY


@parameters
class _Sample(Params):
    count: int = param(3, ge=1, doc="a count")
    share: float = param(0.5, ge=0, le=1, doc="a share")
    limit: float | None = param(None, doc="an optional limit")
    names: tuple[str, ...] = param(("a",), doc="names")
    codes: Mapping[int, int] = param({}, ge=1, doc="code -> count")


def test_the_schema_says_type_nullability_items_keys_and_bounds() -> None:
    assert schema_of(_Sample) == {
        "count": {"type": ("int",), "ge": 1},
        "share": {"type": ("number",), "ge": 0, "le": 1},
        "limit": {"type": ("number", "null")},
        "names": {"type": ({"list": ("str",)},)},
        "codes": {"type": ({"map": ("int",), "key": "int"},), "ge": 1}}


def test_binding_gives_the_declared_types() -> None:
    got = bind(_Sample, schema_of(_Sample),
               {"share": 1, "names": ["x", "y"], "codes": {"48": 2, 79: 1}})
    assert got == _Sample(count=3, share=1.0, names=("x", "y"), codes={48: 2, 79: 1})
    assert isinstance(got.share, float)
    with pytest.raises(ParamsError, match="unknown parameter 'cuont'"):
        bind(_Sample, schema_of(_Sample), {"cuont": 1})


def test_a_mapping_default_is_not_shared_between_instances() -> None:
    assert _Sample().codes is not _Sample().codes


@pytest.mark.parametrize(("build", "problem"), [
    (lambda: param([], doc="x"), "a tuple"),
    (lambda: param(1, doc=" "), "doc="),
])
def test_param_refuses_a_list_default_and_a_missing_doc(build: object, problem: str) -> None:
    with pytest.raises(TypeError, match=problem):
        build()  # type: ignore[operator]


def test_the_schema_refuses_what_a_config_cannot_say() -> None:
    @parameters
    class Undocumented(Params):
        count: int = 3

    @record
    class Thawed(Params):
        count: int = param(3, doc="a count")

    @parameters
    class Odd(Params):
        raw: bytes = param(b"", doc="bytes")

    for cls, problem in ((Undocumented, "param"), (Thawed, "frozen"), (Odd, "cannot be")):
        with pytest.raises(TypeError, match=problem):
            schema_of(cls)


def test_a_check_reads_its_own_parameters_only() -> None:
    from clusterdiag.checks.gpu.memory import EccUncorrectedParams
    from clusterdiag.checks.gpu.xid import XidParams

    ctx = CheckContext(snapshot=make_snap(), profile=load_profile("generic"),
                       params=EccUncorrectedParams())
    assert EccUncorrectedParams.of(ctx).max_volatile == 0
    with pytest.raises(TypeError, match="EccUncorrectedParams, not XidParams"):
        XidParams.of(ctx)
    assert isinstance(CheckContext(snapshot=make_snap(), profile=ctx.profile).params, NoParams)


# (check, parameter, a bad value, what the one line says)
BAD_VALUES = [
    ("gpu.ecc_uncorrected", "max_volatile", "lots", "must be an integer, got str 'lots'"),
    ("gpu.ecc_uncorrected", "max_volatile", 1.5, "must be an integer, got float 1.5"),
    ("gpu.ecc_uncorrected", "max_volatile", -1, "must be at least 0, got -1"),
    ("gpu.clocks", "max_slowdown_share", 2, "must be from 0 to 1, got 2"),
    ("gpu.ecc_uncorrected", "max_volatile", None, "must be an integer, got NoneType None"),
    ("gpu.ecc_mode", "required", 1, "must be true/false, got int 1"),
    ("gpu.xid", "ignore", [48, "x"], "must be a list of integers, got list [48, 'x']"),
    ("gpu.xid", "ignore", 48, "must be a list of integers, got int 48"),
    ("gpu.xid", "repeat_thresholds", {"x48": 2}, "must be a mapping of codes to integers"),
    ("gpu.xid", "repeat_thresholds", {48: 0}, "must be at least 1"),
    ("ib.error_rate", "symbol_error_per_min", [10], "must have 2 items in each list, got [10]"),
    ("ib.transport_errors", "limits", {"out_of_buffer": [1, 2, 3]}, "must have 2 items"),
    ("ib.port_state", "noncompute", "never", "must be 'warn' or 'ignore', got 'never'"),
    ("nccl.library", "min_version", 2.21, "must be a string or null, got float 2.21"),
    ("gpu.xid", "windw_s", 60, "unknown key 'SECTION.gpu.xid.windw_s' (did you mean "
     "'SECTION.gpu.xid.window_s'?)"),
]


def _one_line(error: ConfigError, path: Path, key: str, problem: str) -> None:
    text = str(error)
    assert "\n" not in text
    assert str(path) in text, text
    assert key in text, text
    assert problem in text, text


@pytest.mark.parametrize(("check_id", "key", "value", "problem"), BAD_VALUES)
def test_a_bad_parameter_in_the_config_is_one_line_naming_file_and_key(
        tmp_path: Path, check_id: str, key: str, value: object, problem: str) -> None:
    import json

    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"checks": {check_id: {key: value}}}))
    with pytest.raises(ConfigError) as caught:
        load_config(path, schemas())
    _one_line(caught.value, path, f"checks.{check_id}.{key}",
              problem.replace("SECTION", "checks"))


@pytest.mark.parametrize(("check_id", "key", "value", "problem"), BAD_VALUES)
def test_a_bad_threshold_in_a_site_profile_is_one_line_naming_file_and_key(
        tmp_path: Path, check_id: str, key: str, value: object, problem: str) -> None:
    import json

    path = tmp_path / "site.yaml"
    path.write_text(json.dumps({"extends": "dgx-h100", "thresholds": {check_id: {key: value}}}))
    with pytest.raises(ConfigError) as caught:
        load_site_profiles(tmp_path / "none", path)
    _one_line(caught.value, path, f"thresholds.{check_id}.{key}",
              problem.replace("SECTION", "thresholds"))


def test_a_threshold_for_no_check_and_enabled_are_refused_in_a_profile(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    path.write_text("thresholds: {gpu.ecc_uncorected: {max_volatile: 1}}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'thresholds\.gpu\.ecc_uncorected' "
                                          r"\(did you mean 'thresholds\.gpu\.ecc_uncorrected'"):
        load_site_profiles(tmp_path / "none", path)
    path.write_text("thresholds: {gpu.ecc_uncorrected: {enabled: false}}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'thresholds\.gpu\.ecc_uncorrected\."
                                          "enabled'"):
        load_site_profiles(tmp_path / "none", path)


def test_null_is_taken_where_the_dataclass_says_optional(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("checks:\n  gpu.memory_size: {expected_gib: null}\n"
                    "  gpu.power_limit: {expected_w: 700}\n"
                    "  gpu.processes: {job_gpus: '0,1', job_id: 42}\n"
                    "  gpu.xid: {repeat_thresholds: {48: 2, '79': 1}}\n")
    assert load_config(path, schemas()).data["checks"]["gpu.memory_size"] == {
        "expected_gib": None}


def test_the_built_in_profiles_thresholds_are_valid() -> None:
    from clusterdiag.agent.settings.config import validate_check_params

    for name in builtin_names():
        validate_check_params(load_builtin(name).thresholds, f"profile {name}", schemas(),
                              section="thresholds")


def test_the_runner_binds_defaults_under_thresholds_under_the_config() -> None:
    from clusterdiag.checks.gpu.xid import XidParams

    spec = REGISTRY["gpu.xid"]
    profile = dataclasses.replace(load_profile("dgx-h100"), thresholds={
        "gpu.xid": {"window_s": 600, "burst_s": 5, "repeat_thresholds": {"48": 3}}})
    config = Config()
    config.data["checks"] = {"gpu.xid": {"burst_s": 10, "ignore": [13]}}
    assert bound_params(spec, config, profile) == XidParams(
        window_s=600, burst_s=10.0, repeat_thresholds={48: 3}, ignore=(13,))


def test_parameters_set_by_code_that_do_not_fit_are_the_checks_error() -> None:
    config = Config()
    config.data["checks"] = {"gpu.ecc_uncorrected": {"max_volatil": 1}}
    report = evaluate(make_snap(), config, RunOptions(patterns=("gpu.ecc_uncorrected",),
                                                      profile="dgx-h100"), now=NOW)
    (finding,) = report.findings
    assert (finding.check, finding.status) == ("gpu.ecc_uncorrected", Status.ERROR)
    assert finding.message == "parameters not usable: unknown parameter 'max_volatil'"


def test_explain_shows_each_parameter_with_default_type_bounds_and_doc() -> None:
    out = CliRunner().invoke(checks_group, ["explain", "gpu.clocks"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    at = lines.index("  max_slowdown_share: 0.05  (a number, from 0 to 1)")
    assert lines[at + 1].startswith("      share of the time between two samples")
    out = CliRunner().invoke(checks_group, ["explain", "gpu.memory_size"])
    assert "  expected_gib: null  (a number or null, at least 0)" in out.output
