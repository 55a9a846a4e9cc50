"""What an operator sets and reads of the active tests, through the real CLI: a qualify
setting out of range or a misspelt ``qualify:`` key (config or site profile) is exit 2 in
one line naming the key, before any tool runs; ``checks list`` and ``checks explain`` show
every active test as its declaration says (tool, command line as the planner builds it,
figure, unit, action, fault and each profile's expected value with its source), and so
does docs/checks.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterdiag.agent.cli.checks import example_argv
from clusterdiag.agent.qualify.inventory import Inventory, Rail
from clusterdiag.agent.qualify.plan import node_steps
from clusterdiag.agent.settings.config import Config
from clusterdiag.checks.catalogs.manifest import ACTIVE
from clusterdiag.checks.core.levels import Level
from clusterdiag.checks.profiles.profile import builtin_names, load_builtin
from clusterdiag.checks.qualify.active import ACTIVE_TESTS, node_tests
from tests.conftest import REPO, run_cli


def _spec(tmp_path: Path) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps({"nodes": [{"names": "q[1-3]", "profile": "dgx-h100"}]}))
    return str(path)


@pytest.mark.parametrize(("text", "said"), [
    ("qualify:\n  fail_pct: 0\n", "key 'qualify.fail_pct' must be from 1 to 99, got 0"),
    ("qualify:\n  fail_pct: -50\n", "key 'qualify.fail_pct' must be from 1 to 99, got -50"),
    ("qualify:\n  warn_pct: 20\n",
     "key 'qualify.warn_pct' (20) must be at most 'qualify.fail_pct' (10)"),
    ("qualify:\n  deadline_s: {allreduc: 600}\n",
     "unknown key 'qualify.deadline_s.allreduc' (did you mean 'qualify.deadline_s.allreduce'?)"),
    ("qualify:\n  tools: {nvbandwith: /opt/nvbandwidth}\n",
     "unknown key 'qualify.tools.nvbandwith' (did you mean 'qualify.tools.nvbandwidth'?)"),
    ("qualify:\n  rails: {mlx5_0: -2}\n", "key 'qualify.rails.mlx5_0' must be a GPU index"),
    ("qualify:\n  srun_mpi: 'pmix --exclusive'\n", "key 'qualify.srun_mpi' must be auto"),
])
def test_a_bad_qualify_setting_is_one_line_exit_2(tmp_path: Path, text: str, said: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    proc = run_cli("qualify", "--config", str(config), "--simulate", _spec(tmp_path),
                   timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert said in lines[0], proc.stderr
    assert str(config) in lines[0], proc.stderr
    assert proc.stdout == ""


def test_a_misspelt_qualify_key_in_a_site_profile_is_one_line_exit_2(tmp_path: Path) -> None:
    profile = tmp_path / "mysite.yaml"
    profile.write_text("extends: dgx-h100\nqualify:\n  hbmm: {unit: GB/s, floor: 900, "
                       "source: site}\n")
    proc = run_cli("qualify", "--simulate", _spec(tmp_path), "--profile", str(profile),
                   timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    (line,) = proc.stderr.strip().splitlines()
    assert line.endswith(f"profile {profile}: unknown key 'qualify.hbmm' "
                         "(did you mean 'qualify.hbm'?)"), line


def test_checks_list_marks_every_active_test() -> None:
    listing = run_cli("checks", "list")
    assert listing.returncode == 0, listing.stderr
    rows = [line.split(None, 2) for line in listing.stdout.splitlines()
            if line.startswith("qualify.")]
    assert [r[0] for r in rows] == [f"qualify.{t}" for t in ACTIVE_TESTS]
    assert {r[1] for r in rows} == {"active"}
    assert [r[2] for r in rows] == [t.summary for t in ACTIVE_TESTS.values()]


def test_explain_shows_the_tool_the_command_the_unit_and_each_profiles_figure() -> None:
    explain = run_cli("checks", "explain", "qualify.hbm")
    assert explain.returncode == 0, explain.stderr
    text = " ".join(explain.stdout.split())  # the output is wrapped
    hbm = ACTIVE_TESTS["hbm"]
    assert text.startswith("qualify.hbm: GPU memory copy bandwidth (active test)")
    for said in ("tool: nvbandwidth (qualify.tools.nvbandwidth, else on PATH)",
                 "invocation: nvbandwidth -t {selectors}",
                 "as planned: nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce "
                 "device_to_device_memcpy_read_ce device_local_copy",
                 "one run: h2d, d2h, d2d, hbm share one nvbandwidth run",
                 "figure: device_local_copy", "unit: GB/s", f"counts: {hbm.counts}",
                 "action: drain", "fault: hbm_slow",
                 "deadline: 300 s (qualify.deadline_s.nvbandwidth)"):
        assert said in text, (said, explain.stdout)
    declaring = [n for n in builtin_names() if "hbm" in load_builtin(n).qualify]
    assert declaring
    for name in declaring:
        entry = load_builtin(name).qualify["hbm"]
        numbers = ", ".join(f"{k} {entry[k]:g}" for k in ("expected", "floor") if k in entry)
        assert f"{name}: {numbers} GB/s; source: {entry['source']}" in text, name
    where, line = explain.stdout.splitlines()[-1].removeprefix("defined at: ").rsplit(":", 1)
    assert (REPO / where).read_text().splitlines()[int(line) - 1].lstrip().startswith(
        'ActiveTest("hbm",')


@pytest.mark.parametrize("test", [t.id for t in node_tests()])
def test_explain_shows_the_command_line_the_planner_builds(test: str) -> None:
    """The same example node the CLI plans for, planned here by the planner itself."""
    inventory = Inventory(gpus=list(range(8)), rails=[Rail("mlx5_0", 1, 0, "example")],
                          perftest_cuda=True, gpu_burn_compare="/opt/gpu-burn/compare.fatbin")
    steps = node_steps(inventory, Level.QUICK, Config().section("qualify"),
                       frozenset(t.id for t in node_tests()))
    (step,) = [s for s in steps if test in s.tests]
    assert example_argv(test) == " ".join((*(f"{k}={v}" for k, v in step.env), *step.argv))
    assert step.argv[0] == ACTIVE_TESTS[test].invocation.program


def test_explain_of_an_unknown_active_test_is_exit_2_with_did_you_mean() -> None:
    proc = run_cli("checks", "explain", "qualify.hbmm")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "clusterdiag: unknown check 'qualify.hbmm' (did you mean 'qualify.hbm'?)"]


def test_the_manifest_and_the_catalog_page_hold_every_active_test() -> None:
    assert list(ACTIVE) == list(ACTIVE_TESTS)
    for test, declared in ACTIVE_TESTS.items():
        assert ACTIVE[test]["unit"] == declared.unit
        assert ACTIVE[test]["invocation"]["program"] == declared.invocation.program
        assert ACTIVE[test]["fault"] == declared.fault
    page = (REPO / "docs/checks.md").read_text()
    for test in ACTIVE_TESTS:
        assert f"\n### qualify.{test}\n" in page, test
