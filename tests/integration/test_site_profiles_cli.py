"""Site profiles through the real command: ``--profile FILE``, the config's ``profile:``
(a file or a name from ``profile_dir``), ``profiles list`` and ``profiles show``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

ROCE = ("extends: dgx-h100\ndescription: our H100 nodes, RoCE at 200G\n"
        "hca_link_layer: Ethernet\nhca_rate_gbps: 200\n")
SAME = "extends: dgx-h100\ndescription: our DGX H100s\ngpu_count: 8\n"


def _site(tmp_path: Path) -> tuple[Path, Path]:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "roce-h100.yaml").write_text(ROCE)
    (profiles / "our-h100.yaml").write_text(SAME)
    config = tmp_path / "config.yaml"
    config.write_text(f"profile_dir: {profiles}\n")
    return profiles, config


def _fails(proc_stdout: str) -> set[tuple[str, str]]:
    report = json.loads(proc_stdout)
    return {(f["check"], f["component"]) for f in report["findings"]
            if f["status"] in ("fail", "error")}


def test_a_site_profile_file_judges_the_node(tmp_path: Path) -> None:
    profiles, _ = _site(tmp_path)
    healthy = run_cli("run", "--simulate", "dgx-h100", "--profile",
                      str(profiles / "our-h100.yaml"), "--format", "json")
    assert healthy.returncode == 0, healthy.stdout
    assert json.loads(healthy.stdout)["profile"]["name"] == "our-h100"
    # An InfiniBand node judged against a RoCE profile: its InfiniBand rails are not the
    # compute fabric (roles are the judge's, from the profile), and ib.hca_count names all
    # eight beside their GPUs as running the wrong link layer.
    roce = run_cli("run", "--simulate", "dgx-h100", "--profile",
                   str(profiles / "roce-h100.yaml"), "--format", "json")
    assert roce.returncode == 1
    assert _fails(roce.stdout) == {("ib.hca_count", "node")}
    (count,) = [f for f in json.loads(roce.stdout)["findings"] if f["check"] == "ib.hca_count"]
    assert count["action"] == "fix_config"
    assert len(count["observed"]["wrong_link_layer"]) == 8


def test_the_config_names_a_profile_of_its_directory_or_a_file(tmp_path: Path) -> None:
    profiles, config = _site(tmp_path)
    config.write_text(f"profile_dir: {profiles}\nprofile: roce-h100\n")
    by_name = run_cli("run", "--simulate", "dgx-h100", "--config", str(config),
                      "--format", "json")
    assert by_name.returncode == 1
    assert json.loads(by_name.stdout)["profile"]["name"] == "roce-h100"
    other = tmp_path / "config2.yaml"
    other.write_text(f"profile: {profiles / 'our-h100.yaml'}\n")
    by_file = run_cli("run", "--simulate", "dgx-h100", "--config", str(other),
                      "--format", "json")
    assert by_file.returncode == 0, by_file.stdout
    assert json.loads(by_file.stdout)["profile"]["name"] == "our-h100"


def test_profiles_list_shows_the_site_beside_the_builtins(tmp_path: Path) -> None:
    _, config = _site(tmp_path)
    proc = run_cli("profiles", "list", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    names = {line.split()[0]: line for line in proc.stdout.splitlines()}
    assert "dgx-h100" in names
    assert names["roce-h100"].endswith("(site)")
    assert "RoCE at 200G" in names["roce-h100"]


def test_profiles_show_prints_the_merge_and_where_each_value_came_from(tmp_path: Path) -> None:
    profiles, config = _site(tmp_path)
    proc = run_cli("profiles", "show", "--config", str(config), "roce-h100")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    source = str(profiles / "roce-h100.yaml")
    assert lines[0] == f"# site profile {source}, extends dgx-h100"
    assert f"hca_link_layer: Ethernet   # {source}" in lines
    assert f"hca_rate_gbps: 200   # {source}" in lines
    assert "nvlinks_per_gpu: 18   # built-in dgx-h100" in lines
    builtin = run_cli("profiles", "show", "dgx-h100")
    assert "gpu_count: 8   # built-in dgx-h100" in builtin.stdout.splitlines()


@pytest.mark.parametrize(("text", "needle"), [
    ("extends: dgx-h100\nhca_rate_gpbs: 200\n", "unknown key 'hca_rate_gpbs' (did you mean "
     "'hca_rate_gbps'?)"),
    ("extends: nothing-like-it\n", "key 'extends': unknown profile 'nothing-like-it'"),
    ("extends: bad\n", "key 'extends': a cycle (bad -> bad)"),
])
def test_a_bad_site_profile_is_exit_2_in_one_line(tmp_path: Path, text: str,
                                                  needle: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    proc = run_cli("run", "--simulate", "dgx-h100", "--profile", str(path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"clusterdiag: profile {path}: {needle}"


def test_a_missing_profile_file_is_exit_2(tmp_path: Path) -> None:
    proc = run_cli("run", "--simulate", "dgx-h100", "--profile", str(tmp_path / "no.yaml"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"clusterdiag: profile {tmp_path / 'no.yaml'}: no such file"


def test_the_agent_judges_with_a_site_profile_file(tmp_path: Path) -> None:
    from tests.integration.daemon_helpers import AgentProc

    profiles, _ = _site(tmp_path)
    agent = AgentProc(tmp_path, "--profile", str(profiles / "roce-h100.yaml"), interval=1.0)
    try:
        agent.wait_ready()
        report = json.loads((agent.state / "report.json").read_text())
    finally:
        agent.stop()
    assert report["profile"]["name"] == "roce-h100"
    assert {f["check"] for f in report["findings"] if f["status"] == "fail"} == {"ib.hca_count"}
