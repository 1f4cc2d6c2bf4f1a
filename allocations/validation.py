"""The one validation of a request's kind, details and end (the API's serializer and the page
both wrap it). `request_clean` answers the details as stored (JSON types), or raises
RequestInvalid with the errors per field; nothing is written either way. A reservation's
details are the calendar's own booking fields, checked by its validation now and again when
the request is approved (the calendar may have filled meanwhile)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from calendars.validation import reservation_clean
from catalogue.fields import invisible_characters_refusal
from catalogue.models import GpuType
from core.validation import FieldsInvalid, Refused, day, moment, whole_number
from identity.client import KeystoneUnavailable
from identity.selectors import UserRefused, project_users, user_resolve
from tenants.models import Tenant

from .models import ResourceRequest

MAX_GPUS = 10_000
MAX_GPU_HOURS = 1_000_000_000
MAX_GRANT = dt.timedelta(days=366 * 2)  # how far ahead a temporary grant may end
TEMPORARY = {ResourceRequest.Kind.QUOTA, ResourceRequest.Kind.BUDGET,
             ResourceRequest.Kind.ALLOWANCE}
FIELDS = {ResourceRequest.Kind.QUOTA: {"gpu_type", "gpus"},
          ResourceRequest.Kind.BUDGET: {"gpu_hours"},
          ResourceRequest.Kind.ALLOWANCE: {"gpu_hours"},
          ResourceRequest.Kind.RESERVATION: {"gpu_type", "count", "start", "end", "note"},
          ResourceRequest.Kind.RENEWAL: {"allocation_ends"}}


class RequestInvalid(FieldsInvalid):
    """A request refused as asked: `errors` maps each field to what is wrong with it."""


def _details(kind: str, details: Mapping[str, Any], errors: dict[str, list[str]],
             now: dt.datetime) -> dict[str, Any]:
    unknown = sorted(set(details) - FIELDS[ResourceRequest.Kind(kind)])
    if unknown:
        errors["details"] = [f"Unknown for a {kind} request: {', '.join(unknown)}."]
        return {}
    clean: dict[str, Any] = {}
    try:
        if kind == ResourceRequest.Kind.QUOTA:
            slug = details.get("gpu_type")
            if not isinstance(slug, str) or not GpuType.objects.filter(slug=slug,
                                                                       enabled=True).exists():
                raise Refused("gpu_type: a GPU type of the catalogue's, by its slug.")
            clean = {"gpu_type": slug, "gpus": whole_number(
                details.get("gpus"), low=1, high=MAX_GPUS, what="gpus: a whole number")}
        elif kind in (ResourceRequest.Kind.BUDGET, ResourceRequest.Kind.ALLOWANCE):
            clean = {"gpu_hours": whole_number(details.get("gpu_hours"), low=1,
                                               high=MAX_GPU_HOURS,
                                               what="gpu_hours: a whole number")}
        elif kind == ResourceRequest.Kind.RENEWAL:
            clean = {"allocation_ends": day(details.get("allocation_ends")).isoformat()}
        else:
            reservation_clean(details, now=now)
            clean = dict(details)
    except FieldsInvalid as exc:
        errors["details"] = [f"{field}: {' '.join(messages)}"
                             for field, messages in exc.errors.items()]
    except Refused as exc:
        errors["details"] = [str(exc)]
    return clean


def request_clean(data: Mapping[str, Any], *, now: dt.datetime) -> dict[str, Any]:
    """{kind, details, justification, ends_at?} → the request's clean fields."""
    errors: dict[str, list[str]] = {}
    kind = data.get("kind")
    if kind not in ResourceRequest.Kind.values:
        errors["kind"] = [f"One of {', '.join(ResourceRequest.Kind.values)}."]
    justification = data.get("justification")
    if not isinstance(justification, str) or not justification.strip():
        errors["justification"] = ["Say why: a justification is required."]
    elif len(justification) > 4000:
        errors["justification"] = ["At most 4000 characters."]
    details = data.get("details")
    if not isinstance(details, Mapping):
        errors["details"] = ["An object of the kind's fields."]
        details = {}
    clean = _details(str(kind), details, errors, now) if "kind" not in errors else {}
    ends_at = None
    if data.get("ends_at") is not None:
        try:
            ends_at = moment(data.get("ends_at"))
        except Refused as exc:
            errors["ends_at"] = [str(exc)]
        else:
            if kind not in TEMPORARY:
                errors["ends_at"] = ["Only a quota, budget or allowance is granted for a while."]
            elif not now < ends_at <= now + MAX_GRANT:
                errors["ends_at"] = ["A time in the next two years."]
    if errors:
        raise RequestInvalid(errors)
    return {"kind": kind, "details": clean, "justification": str(justification).strip(),
            "ends_at": ends_at}


class RecordInvalid(FieldsInvalid):
    """A record's change refused: `errors` maps each field to what is wrong with it."""


MAX_GRANTS = 20


def _text_of(value: Any, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise Refused(f"Text of at most {limit} characters.")
    refusal = invisible_characters_refusal(value, "The text")
    if refusal:
        raise Refused(refusal)
    return value.strip()


def _grants(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_GRANTS:
        raise Refused(f"A list of at most {MAX_GRANTS} grant numbers or cost centres.")
    return [_text_of(item, 100) for item in value]


def record_clean(data: Mapping[str, Any], *, tenant: Tenant) -> dict[str, Any]:
    """The fields of a record's change that `data` names (API names: principal_investigator,
    grants, field, allocation_ends) → the record's fields; RecordInvalid otherwise. The
    principal investigator is a user of the project now (Keystone asked)."""
    errors: dict[str, list[str]] = {}
    clean: dict[str, Any] = {}
    readers = {"grants": ("grants", _grants),
               "field": ("research_field", lambda value: _text_of(value, 100)),
               "allocation_ends": ("allocation_ends",
                                   lambda value: None if value is None else day(value))}
    for name, (field, read) in readers.items():
        if name in data:
            try:
                clean[field] = read(data[name])
            except Refused as exc:
                errors[name] = [str(exc)]
    if "principal_investigator" in data:
        wanted = data["principal_investigator"]
        try:
            clean["principal_investigator"] = None if wanted in (None, "") else user_resolve(
                _text_of(wanted, 255), among=project_users(tenant.keystone_project_id),
                where=f"of {tenant.name}")
        except (Refused, UserRefused) as exc:
            errors["principal_investigator"] = [str(exc)]
        except KeystoneUnavailable:
            errors["principal_investigator"] = [
                "Keystone cannot be asked who the project's users are now; try again."]
    if errors:
        raise RecordInvalid(errors)
    return clean
