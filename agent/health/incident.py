"""From a failing finding to an incident, and from an incident to the validation its fault
class declares (checks/core/validation.py): what every drainer and ``clusterdiag
validate`` agree on, so a family is counted and validated the same way everywhere."""

from __future__ import annotations

from collections.abc import Mapping

from ...checks.core import index
from ...checks.core.finding import Finding
from ...checks.core.validation import Kind, Validation, for_qualify_test, recheck
from .lifecycle import Incident


def validation_for(check_id: str) -> Validation:
    """The declared validation of ``check_id``: its ``@check(validation=...)``, the same
    qualify test for a qualify test's finding, else a recheck of the check itself (which
    ``clusterdiag validate`` reports it cannot run when the catalog has no such check)."""
    if (found := for_qualify_test(check_id)) is not None:
        return found
    entry = index.known().get(check_id)
    if entry is not None:
        spec = index.specs([entry])[0]
        if spec.validation is not None:
            return spec.validation
    return recheck(check_id)


def hold_down_s(validation: Validation, overrides: Mapping[str, float]) -> float:
    """A recheck's hold-down: the site's for its family (``health.hold_down_s``), else the
    declared one. A qualify validation has none: its test is the evidence."""
    if validation.kind is Kind.RECHECK and validation.family in overrides:
        return float(overrides[validation.family])
    return validation.hold_down_s


def incident_from(finding: Finding, now: float) -> Incident:
    """The incident a failing finding opens: its family, check, component and figure."""
    return Incident(validation_for(finding.check).family, finding.check, finding.component,
                    finding.brief(), now)
