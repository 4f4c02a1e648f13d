"""Sample configuration of a workspace: catalog, bindings, API publications, schedules.

The rows cover every row of the platform's execution-model decision table and
a few deliberate contradictions, so that execution-model discovery can be
tested against them: a schedule targeting a non-Job function, an Enqueue
publication on a non-Job contract, a retired key and a disabled key.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import Any, ClassVar, cast

from orchestrator.simulator.enums import BINDING_SOURCE, CONTRACT, PUBLICATION_KIND


class _Row:
    __slots__ = ()
    WIRE: ClassVar[tuple[str, ...]]  # the wire's name for each field, in field order

    def body(self) -> dict[str, object]:
        """The row as the admin routes answer it."""
        return dict(zip(self.WIRE, astuple(cast(Any, self)), strict=True))


@dataclass(frozen=True, slots=True)
class FunctionRow(_Row):
    WIRE = (
        "BusinessFunctionId",
        "FunctionKey",
        "Name",
        "Scope",
        "CurrentPublishedContract",
        "Revision",
    )
    business_function_id: str
    function_key: str
    name: str
    scope: str  # "Global" | "Entity"
    contract: int
    revision: int = 1


@dataclass(frozen=True, slots=True)
class BindingRow(_Row):
    WIRE = ("BindingId", "BusinessFunctionId", "Source", "EntityName")
    binding_id: str
    business_function_id: str
    source: int
    entity_name: str


@dataclass(frozen=True, slots=True)
class PublicationRow(_Row):
    WIRE = ("BusinessFunctionId", "FunctionKey", "Kind", "IsEnabled", "IsRetired", "TimeoutSeconds")
    business_function_id: str
    function_key: str
    kind: int
    is_enabled: bool = True
    is_retired: bool = False
    timeout_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class ActionRow:
    """A UI action: an Action function, on one entity's records or global (None)."""

    action_id: str
    business_function_id: str
    entity_name: str | None


@dataclass(frozen=True, slots=True)
class ScheduleSeed:
    schedule_id: str
    business_function_id: str
    cron: str
    enabled: bool


_C = CONTRACT.value
FUNCTIONS = (
    FunctionRow(
        "fn-invoice-validate", "invoices.validate", "Validate invoice", "Entity", _C("Validation")
    ),
    FunctionRow(
        "fn-customer-normalize",
        "customers.normalize",
        "Normalize customer",
        "Entity",
        _C("BeforeSaveMutation"),
    ),
    FunctionRow("fn-pricing-quote", "pricing.quote", "Quote a price", "Global", _C("Command")),
    FunctionRow(
        "fn-stripe-webhook", "webhooks.stripe", "Stripe webhook", "Global", _C("HttpEndpoint")
    ),
    FunctionRow(
        "fn-billing-sync", "billing.sync-invoices", "Sync invoices", "Global", _C("Job"), 4
    ),
    FunctionRow(
        "fn-reports-export", "reports.nightly-export", "Nightly export", "Global", _C("Job"), 2
    ),
    FunctionRow(
        "fn-order-shipped", "orders.on-shipped", "Order shipped", "Entity", _C("TriggerHandler")
    ),
    FunctionRow("fn-order-approve", "orders.approve", "Approve order", "Entity", _C("Action")),
    FunctionRow(
        "fn-order-audit",
        "orders.audit-change",
        "Audit order change",
        "Entity",
        _C("TriggerHandler"),
    ),
    FunctionRow(
        "fn-search-reindex", "search.reindex", "Rebuild search index", "Global", _C("Action")
    ),
    # Contradiction: an Enqueue publication on a Command contract.
    FunctionRow(
        "fn-totals-recalc", "totals.recalculate", "Recalculate totals", "Global", _C("Command"), 3
    ),
    # A retired key and a disabled key, both Job functions.
    FunctionRow(
        "fn-legacy-import", "imports.legacy-csv", "Legacy CSV import", "Global", _C("Job"), 7
    ),
    FunctionRow("fn-payroll-run", "payroll.run", "Payroll run", "Global", _C("Job")),
)

BINDINGS = (
    BindingRow(
        "bind-invoice-save", "fn-invoice-validate", BINDING_SOURCE.value("EntitySave"), "Invoice"
    ),
    BindingRow(
        "bind-customer-save",
        "fn-customer-normalize",
        BINDING_SOURCE.value("EntitySave"),
        "Customer",
    ),
    BindingRow(
        "bind-order-shipped", "fn-order-shipped", BINDING_SOURCE.value("EntityTrigger"), "Order"
    ),
    # A second trigger on the same entity: one save starts a job for each binding.
    BindingRow(
        "bind-order-audit", "fn-order-audit", BINDING_SOURCE.value("EntityTrigger"), "Order"
    ),
)

ACTIONS = (
    ActionRow("act-order-approve", "fn-order-approve", "Order"),
    ActionRow("act-search-reindex", "fn-search-reindex", None),
)

_P = PUBLICATION_KIND.value
PUBLICATIONS = (
    PublicationRow("fn-pricing-quote", "pricing.quote", _P("Command"), timeout_seconds=30),
    PublicationRow("fn-billing-sync", "billing.sync-invoices", _P("Enqueue"), timeout_seconds=300),
    PublicationRow(
        "fn-reports-export", "reports.nightly-export", _P("Enqueue"), timeout_seconds=900
    ),
    PublicationRow("fn-totals-recalc", "totals.recalculate", _P("Enqueue")),
    PublicationRow("fn-legacy-import", "imports.legacy-csv", _P("Enqueue"), is_retired=True),
    PublicationRow("fn-payroll-run", "payroll.run", _P("Enqueue"), is_enabled=False),
)

SCHEDULES = (
    ScheduleSeed("sch-billing-nightly", "fn-billing-sync", "0 2 * * *", True),
    ScheduleSeed("sch-reports-weekly", "fn-reports-export", "30 3 * * MON", False),
    # Contradiction: a schedule whose target is a Command function, not a Job.
    ScheduleSeed("sch-quote-refresh", "fn-pricing-quote", "0 */6 * * *", True),
)

FUNCTIONS_BY_ID = {f.business_function_id: f for f in FUNCTIONS}
FUNCTIONS_BY_KEY = {f.function_key: f for f in FUNCTIONS}
PUBLICATIONS_BY_KEY = {p.function_key: p for p in PUBLICATIONS}
ACTIONS_BY_ID = {a.action_id: a for a in ACTIONS}


def trigger_bindings(entity_name: str) -> list[BindingRow]:
    """The EntityTrigger bindings a save of an ``entity_name`` record starts, in order."""
    trigger = BINDING_SOURCE.value("EntityTrigger")
    return [
        b for b in BINDINGS if b.source == trigger and b.entity_name.lower() == entity_name.lower()
    ]


def ad_hoc_function_id(function_key: str) -> str:
    """The BusinessFunctionId given to an enqueued key the sample catalog does not list."""
    return "fn-" + function_key
