"""The drain reason's grammar (agent/slurm/reason.py): what each entry point writes, that
it reads back the same, that older reasons still read as they did, and that hostile text
stays one bounded, inert line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdiag.agent.slurm.reason import (
    MAX_LENGTH,
    Lift,
    Reason,
    Verb,
    from_error,
    from_findings,
    owned,
    parse,
    write,
)
from clusterdiag.checks.core.finding import Action, Finding, Status


def _fail(check: str, component: str, message: str, observed: object = None) -> Finding:
    return Finding(Status.FAIL, component, message, observed, None, Action.INVESTIGATE, check)


LINKS = _fail("nvlink.links_up", "gpu3", "NVLinks down", "17/18 (down: 7)")


@pytest.mark.parametrize(("program", "text", "lift"), [
    ("prolog", "clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)", Lift.CHECK),
    ("healthcheck", "clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)", Lift.CHECK),
    ("epilog", "clusterdiag: epilog nvlink.links_up gpu3 17/18 (down: 7)", Lift.PERSON),
    ("qualify", "clusterdiag: qualify nvlink.links_up gpu3 17/18 (down: 7)", Lift.PERSON),
])
def test_each_entry_point_writes_the_grammar_and_reads_it_back(
        program: str, text: str, lift: Lift) -> None:
    reason = from_findings([LINKS], program=program)
    assert reason is not None
    assert write(reason) == text
    assert parse(text) == reason
    assert (reason.verb, reason.check, reason.component, reason.detail, reason.lift) == (
        Verb.of(program), "nvlink.links_up", "gpu3", "17/18 (down: 7)", lift)


def test_our_own_error_names_no_check_and_is_lifted_by_a_clean_pass() -> None:
    text = write(from_error("ConfigError: checks.gpu.xid: unknown key 'x'"))
    assert text == "clusterdiag: error ConfigError: checks.gpu.xid: unknown key 'x'"
    read = parse(text)
    assert read is not None
    assert (read.verb, read.check, read.component, read.lift) == (Verb.ERROR, None, "",
                                                                  Lift.CLEAN)


def test_a_node_finding_names_its_component_so_the_detail_reads_back() -> None:
    disk = _fail("host.disk", "", "disk nearly full", ["/tmp"])
    reason = from_findings([disk])
    assert reason is not None
    assert write(reason) == "clusterdiag: host.disk node disk nearly full"
    assert parse(write(reason)) == reason


def test_the_others_are_counted_and_the_count_reads_back() -> None:
    xid = _fail("gpu.xid", "gpu1", "Xid 79 (GPU_HAS_FALLEN_OFF_THE_BUS)", {"xid": 79})
    warn = Finding(Status.WARN, "gpu0", "warm", 80, None, Action.NONE, "gpu.temperature")
    reason = from_findings([warn, xid, LINKS])
    assert reason is not None
    assert write(reason) == ("clusterdiag: gpu.xid gpu1 Xid 79 (GPU_HAS_FALLEN_OFF_THE_BUS) "
                             "(+1 more)")
    assert parse(write(reason)) == reason
    assert reason.more == 1
    assert from_findings([warn]) is None
    assert from_findings([warn], statuses=(Status.FAIL, Status.WARN)) is not None


@pytest.mark.parametrize(("text", "verb", "check", "lift"), [
    ("clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)", Verb.NONE, "nvlink.links_up",
     Lift.CHECK),
    ("clusterdiag: epilog gpu.xid gpu1 Xid 79", Verb.EPILOG, "gpu.xid", Lift.PERSON),
    ("clusterdiag: error ConfigError: bad", Verb.ERROR, None, Lift.CLEAN),
    ("clusterdiag: error 2 check(s) could not run, first gpu.xid: x", Verb.ERROR, None,
     Lift.CLEAN),
    ("clusterdiag: qualify rails mlx5_4/1 321.9 Gb/s", Verb.QUALIFY, "rails", Lift.PERSON),
    ("clusterdiag: host.disk disk nearly full (+2 more)", Verb.NONE, "host.disk", Lift.CHECK),
    ("  clusterdiag:   host.disk node full", Verb.NONE, "host.disk", Lift.CHECK),
    ("clusterdiag: epilog", Verb.EPILOG, None, Lift.PERSON),
    ("clusterdiag:", Verb.NONE, None, Lift.CLEAN),
])
def test_reasons_older_versions_wrote_read_as_they_did(text: str, verb: Verb,
                                                       check: str | None, lift: Lift) -> None:
    """The health check reads reasons written before an upgrade: the verb and the check
    decide whether it resumes the node."""
    read = parse(text)
    assert read is not None
    assert (read.verb, read.check, read.lift) == (verb, check, lift)


@pytest.mark.parametrize("text", [
    None, "", "Prolog error", "Epilog error", "op: bad fan [ticket 12]", "NHC: clusterdiag: x",
    "op: clusterdiag: gpu.xid", "\u200bclusterdiag: gpu.xid gpu1 x", "Clusterdiag: x",
])
def test_a_reason_not_ours_parses_to_none(text: str | None) -> None:
    assert parse(text) is None
    assert owned(text) is (not (text or "").strip())


def test_a_check_spelled_like_a_verb_cannot_read_back_as_one() -> None:
    """An agent report names the check: ``error`` there must not become our own error,
    which a clean pass lifts."""
    for word in ("error", "epilog", "qualify", "repair"):
        reason = Reason(Verb.NONE, word, "gpu1", "x")
        read = parse(write(reason))
        assert read == reason
        assert read is not None
        assert (read.verb, read.check, read.lift) == (Verb.NONE, f"{word}?", Lift.CHECK)


def test_a_repeat_offender_is_held_for_a_person_and_reads_back() -> None:
    """A node held for repair names its check, component and the drain count; only a
    person lifts it (``clusterdiag validate --release``), never a passing check."""
    reason = Reason(Verb.REPAIR, "nvlink.error_rate", "gpu3", "(3 drains in 7 d)")
    text = write(reason)
    assert text == "clusterdiag: repair nvlink.error_rate gpu3 (3 drains in 7 d)"
    read = parse(text)
    assert read == reason
    assert read is not None
    assert (read.verb, read.check, read.component, read.lift) == (
        Verb.REPAIR, "nvlink.error_rate", "gpu3", Lift.PERSON)


def test_hostile_text_is_one_inert_line_within_the_bound() -> None:
    reason = Reason(Verb.EPILOG, "gpu.xid\nState=RESUME", "gpu1 \x1b[2J" + "g" * 500,
                    'Xid 79\r\nReason="x" \u202e\x00 ' + "y" * 500, more=3)
    text = write(reason)
    assert len(text) <= MAX_LENGTH
    assert text.isprintable()
    assert '"' not in text
    assert text.startswith("clusterdiag: epilog gpu.xid_State=RESUME gpu1_")
    assert text.endswith("... (+3 more)")
    read = parse(text)
    assert read is not None
    assert write(read) == text


def test_a_count_in_the_detail_is_the_reasons_count() -> None:
    """Otherwise it would read back as ``more`` and the round trip would not hold."""
    reason = Reason(Verb.NONE, "gpu.xid", "gpu1", "Xid 79 (+2 more) (+1 more)", more=1)
    assert (reason.detail, reason.more) == ("Xid 79", 4)
    assert parse(write(reason)) == reason


def test_a_reason_naming_no_check_says_nothing_else() -> None:
    with pytest.raises(ValueError, match="names no check"):
        Reason(Verb.NONE, None, "gpu1", "x")
    assert Reason(Verb.NONE, "", "", "x").check == "?"


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200)


@settings(max_examples=300, deadline=None)
@given(verb=st.sampled_from(list(Verb)), check=_TEXT, component=_TEXT, detail=_TEXT,
       more=st.integers(min_value=-5, max_value=10**12))
def test_any_reason_round_trips_within_the_bound(verb: Verb, check: str, component: str,
                                                 detail: str, more: int) -> None:
    reason = Reason(verb, check, component, detail, more)
    text = write(reason)
    assert len(text) <= MAX_LENGTH
    assert text.isprintable()
    assert '"' not in text
    read = parse(text)
    assert read is not None
    if not text.endswith("...") and "... (+" not in text:
        assert read == reason
    assert (read.verb, read.check, read.component, read.more) == (
        reason.verb, reason.check, reason.component, reason.more)
    assert write(read) == text
