"""The aiohttp application: the Kubernetes REST API over the store.

Request flow: middlewares (catch-all → Status bodies, bearer token, body size) → routing of
`/api/...` and `/apis/...` paths into (resource type, namespace, name, subresource) → one
handler per verb. Objects travel as plain dicts in their wire shape.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from kubesim import defaults, discovery, openapi, patch, protobuf, tables, validation
from kubesim.config import SimConfig
from kubesim.errors import (
    ApiError,
    bad_request,
    cause,
    gone,
    internal,
    invalid_list_options,
    method_not_allowed,
    path_not_found,
    timeout,
    too_large,
    unauthorized,
    unsupported_media_type,
)
from kubesim.resources import Obj, ResourceType, lookup
from kubesim.selectors import (
    matcher,
    parse_field_selector,
    parse_label_selector,
    selector_from_match,
)
from kubesim.store import Store, encode
from kubesim.watch import DEFAULT_TIMEOUT, Watcher, WatchRequest

log = logging.getLogger("kubesim.server")

STORE: web.AppKey[Store] = web.AppKey("store", Store)
CONFIG: web.AppKey[SimConfig] = web.AppKey("config", SimConfig)
CLUSTER: web.AppKey[Any] = web.AppKey("cluster", object)

_JSON = "application/json"
_PROTOBUF = "application/vnd.kubernetes.protobuf"
_PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": "apply",
}
_PROPAGATION = ("Background", "Foreground", "Orphan")
_UNPROTECTED = {"/healthz", "/readyz", "/livez", "/version"}


def json_response(
    body: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    data = body if isinstance(body, bytes) else encode(body)
    return web.Response(body=data, status=status, content_type=_JSON, headers=headers)


def error_response(error: ApiError) -> web.Response:
    return json_response(error.status(), status=error.code)


# ----------------------------------------------------------------------------- middlewares

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure becomes a Status body; never a stack trace on the wire."""
    try:
        return await handler(request)
    except ApiError as e:
        return error_response(e)
    except web.HTTPRequestEntityTooLarge:
        return error_response(too_large(request.app[CONFIG].max_body_bytes))
    except web.HTTPException as e:
        if e.status == 404:
            return error_response(path_not_found())
        if e.status == 405:
            return error_response(method_not_allowed())
        raise
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception as e:
        log.exception("unexpected error on %s %s", request.method, request.path_qs)
        return error_response(internal(f"{type(e).__name__}: {e}"))


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    token = request.app[CONFIG].token
    if token and request.path not in _UNPROTECTED:
        header = request.headers.get("Authorization", "")
        if header != f"Bearer {token}":
            raise unauthorized()
    return await handler(request)


# ----------------------------------------------------------------------------- request parsing


@dataclass
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    legacy_watch: bool


def parse_target(group: str, version: str, rest: list[str]) -> Target:
    """`[watch/][namespaces/{ns}/]{plural}[/{name}[/{sub}]]` → what the request is about."""
    legacy_watch = False
    if rest and rest[0] == "watch":
        legacy_watch, rest = True, rest[1:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3 or any(not p for p in rest):
        raise path_not_found()
    rt = lookup(group, version, rest[0])
    if rt is None or (namespace is not None and not rt.namespaced):
        raise path_not_found()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and sub not in rt.subresources:
        raise path_not_found()
    return Target(rt, namespace, name, sub, legacy_watch)


def _check_patch_options(kind: str, request: web.Request) -> None:
    """PatchOptions validation (422, kind PatchOptions, group meta.k8s.io), as the real
    handler does before it reads the object."""
    from kubesim.errors import invalid

    if kind == "apply" and not request.query.get("fieldManager"):
        causes = [cause("FieldValueRequired", "Required value: is required for apply patch",
                        "fieldManager")]
    elif kind != "apply" and "force" in request.query:
        causes = [cause("FieldValueForbidden",
                        "Forbidden: may not be specified for non-apply patch", "force")]
    else:
        return
    raise invalid("PatchOptions", "", causes, group="meta.k8s.io")


def _aggregated_response(doc: dict[str, Any]) -> web.Response:
    resp = web.Response(body=encode(doc))
    resp.headers["Content-Type"] = discovery.AGGREGATED_TYPE
    return resp


def validation_error_for_scale(replicas: Any) -> ApiError:
    from kubesim.errors import invalid

    return invalid("Scale", "", [cause("FieldValueInvalid",
                                       f"Invalid value: {json.dumps(replicas)}: must be greater "
                                       "than or equal to 0", "spec.replicas")],
                   group="autoscaling")


def _flag(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


def _int_param(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise bad_request(
            f"invalid value {raw!r} for parameter {name}: must be an integer"
        ) from None


def _dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for v in values:
        if v != "All":
            raise bad_request(f'Invalid dry run value "{v}": supported values: "All"')
    return bool(values)


def _field_validation(request: web.Request) -> str:
    value = request.query.get("fieldValidation", "Warn") or "Warn"
    if value not in ("Ignore", "Warn", "Strict"):
        raise bad_request(
            f'fieldValidation: Unsupported value: "{value}": supported values: '
            '"Ignore", "Strict", "Warn"'
        )
    return value


async def read_body(request: web.Request) -> bytes:
    limit = request.app[CONFIG].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise too_large(limit)
    # read() returns what has arrived so far, which for a body sent in several packets
    # (kubectl's larger objects, chunked uploads) is only its beginning: read to the end
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.read(limit + 1 - size):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
    return b"".join(chunks)


def decode_object(data: bytes, content_type: str) -> Any:
    if not data.strip():
        raise bad_request("the body of the request was empty")
    if content_type in ("application/yaml", "application/apply-patch+yaml"):
        try:
            return yaml.safe_load(data)
        except yaml.YAMLError as e:
            raise bad_request(f"error converting YAML to JSON: {e}") from None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request(f"couldn't get version/kind; json parse error: {e}") from None


def _check_object(rt: ResourceType, obj: Any, target: Target, *, for_update: bool) -> None:
    """What the real handlers check before validation: a JSON object of this kind, in the
    URL's namespace, named like the URL (updates)."""
    if not isinstance(obj, dict):
        raise bad_request(
            f"couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{type(obj).__name__} into Go value of type struct"
        )
    # Like the real decoder, a body without kind/apiVersion takes them from the URL.
    kind = obj.setdefault("kind", rt.kind) or rt.kind
    api_version = obj.setdefault("apiVersion", rt.api_version) or rt.api_version
    if api_version and api_version != rt.api_version:
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({rt.api_version})"
        )
    if kind != rt.kind:
        raise bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
        )
    meta = obj.get("metadata")
    if isinstance(meta, dict) and rt.namespaced and target.namespace:
        body_ns = meta.get("namespace")
        if body_ns and body_ns != target.namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
    if for_update and isinstance(meta, dict) and meta.get("name") != target.name:
        raise bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL "
            f"({target.name})"
        )


def _warning_headers(warnings: list[str]) -> dict[str, str] | None:
    if not warnings:
        return None
    # aiohttp joins repeated headers badly; one Warning header per response is enough here.
    return {"Warning": ", ".join(f'299 - "{w.replace(chr(34), chr(39))}"' for w in warnings)}


def _wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept


# ----------------------------------------------------------------------------- continue tokens


# A continue token's resourceVersion when it goes on from the newest state (the token a 410
# for an expired continue carries), as the real server's -1.
LATEST = -1


def encode_continue(rv: int, key: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{key[0]}/{key[1]}"})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        ns, _, name = data["start"].partition("/")
        return int(data["rv"]), (ns, name)
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise bad_request(
            "invalid continue token: continue key is not valid: incorrect encoded start "
            "resourceVersion (version meta.k8s.io/v1)"
        ) from None


# ----------------------------------------------------------------------------- handlers


class ApiHandlers:
    def __init__(self, store: Store, config: SimConfig, cluster: Any) -> None:
        self.store = store
        self.config = config
        self.cluster = cluster

    # -- routing ---------------------------------------------------------------------------

    async def core(self, request: web.Request) -> web.StreamResponse:
        parts = request.match_info.get("tail", "").split("/")
        parts = parts[:-1] if parts and parts[-1] == "" else parts
        if not parts:
            if discovery.wants_aggregated(request.headers.get("Accept", "")):
                return _aggregated_response(discovery.aggregated(core=True))
            return json_response(discovery.api_versions(request.host))
        version, rest = parts[0], parts[1:]
        return await self._dispatch(request, "", version, rest)

    async def groups(self, request: web.Request) -> web.StreamResponse:
        parts = request.match_info.get("tail", "").split("/")
        parts = parts[:-1] if parts and parts[-1] == "" else parts
        if not parts:
            if discovery.wants_aggregated(request.headers.get("Accept", "")):
                return _aggregated_response(discovery.aggregated(core=False))
            return json_response(discovery.api_group_list())
        if len(parts) == 1:
            doc = discovery.api_group(parts[0])
            if doc is None:
                raise path_not_found()
            return json_response(doc)
        return await self._dispatch(request, parts[0], parts[1], parts[2:])

    async def _dispatch(
        self, request: web.Request, group: str, version: str, rest: list[str]
    ) -> web.StreamResponse:
        if not rest:
            doc = discovery.api_resource_list(group, version)
            if doc is None or request.method != "GET":
                raise path_not_found()
            return json_response(doc)
        target = parse_target(group, version, rest)
        method = request.method
        rt = target.rt
        if target.legacy_watch:
            if method != "GET" or target.subresource:
                raise method_not_allowed()
            return await self.watch(request, target)
        if target.name is None:
            if method == "GET":
                if _flag(request.query.get("watch")):
                    return await self.watch(request, target)
                return self.list(request, target)
            if method == "POST" and "create" in rt.verbs:
                if rt.namespaced and target.namespace is None:
                    raise method_not_allowed()
                return await self.create(request, target)
            if method == "DELETE" and "deletecollection" in rt.verbs:
                return await self.delete_collection(request, target)
            raise method_not_allowed()
        if rt.namespaced and target.namespace is None:
            raise path_not_found()
        if target.subresource == "log":
            if method != "GET":
                raise method_not_allowed()
            return await self.log(request, target)
        if target.subresource == "scale":
            if method not in ("GET", "PUT", "PATCH"):
                raise method_not_allowed()
            return await self.scale(request, target)
        if method == "GET":
            if _flag(request.query.get("watch")):
                return await self.watch(request, target)
            return self.get(request, target)
        if method == "PUT":
            return await self.update(request, target)
        if method == "PATCH":
            return await self.patch(request, target)
        if method == "DELETE" and target.subresource is None:
            return await self.delete(request, target)
        raise method_not_allowed()

    # -- reads -----------------------------------------------------------------------------

    def get(self, request: web.Request, target: Target) -> web.Response:
        obj = self.store.peek(target.rt, target.namespace, target.name or "")
        if obj is None:
            from kubesim.errors import not_found

            raise not_found(target.rt, target.name or "")
        if _wants_table(request):
            return json_response(
                tables.table(
                    target.rt.kind,
                    [obj],
                    resource_version=obj["metadata"]["resourceVersion"],
                    include_object=request.query.get("includeObject", "Metadata"),
                )
            )
        return json_response(obj)

    def _list_options(self, request: web.Request, target: Target) -> tuple[Any, str | None]:
        rt = target.rt
        label = parse_label_selector(request.query.get("labelSelector"))
        field = parse_field_selector(request.query.get("fieldSelector"), rt.kind)
        return matcher(label, field), field.exact_name()

    def list(self, request: web.Request, target: Target) -> web.Response:
        rt, q = target.rt, request.query
        match, exact_name = self._list_options(request, target)
        limit = _int_param(request, "limit")
        rv_text = q.get("resourceVersion")
        rv_match = q.get("resourceVersionMatch")
        token = q.get("continue")
        if rv_match and not rv_text:
            raise invalid_list_options(
                [
                    cause(
                        "FieldValueForbidden",
                        "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                        "resourceVersionMatch",
                    )
                ]
            )
        if rv_match and rv_match not in ("NotOlderThan", "Exact"):
            raise invalid_list_options(
                [
                    cause(
                        "FieldValueNotSupported",
                        f'Unsupported value: "{rv_match}": supported values: "Exact", "NotOlderThan"',
                        "resourceVersionMatch",
                    )
                ]
            )
        if token and rv_match:
            raise invalid_list_options(
                [
                    cause(
                        "FieldValueForbidden",
                        "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                        "resourceVersionMatch",
                    )
                ]
            )
        if token and rv_text:
            # checked by the storage layer, after the list options: a 400, not a 422
            raise bad_request("specifying resource version is not allowed when using continue")
        at_rv: int | None = None
        after = None
        if token:
            at_rv, after = decode_continue(token)
            if at_rv == LATEST:
                at_rv = None  # a token handed out with a 410: go on from the newest state
            elif at_rv < self.store.oldest_rv:
                expired = gone(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter, or use "
                    "the continue token in this response to retrieve the remainder of the "
                    "results. Continuing with the provided token results in an inconsistent "
                    "list - objects that were created, modified, or deleted between the time "
                    "the first chunk was returned and now may show up in the list."
                )
                expired.list_meta = {"continue": encode_continue(LATEST, after)}
                raise expired
        elif rv_text:
            try:
                wanted = int(rv_text)
            except ValueError:
                raise bad_request(
                    f'resourceVersion: Invalid value: "{rv_text}": must be a valid integer'
                ) from None
            if rv_match == "Exact":
                if wanted == 0:
                    raise invalid_list_options(
                        [
                            cause(
                                "FieldValueForbidden",
                                'Forbidden: resourceVersionMatch "exact" is forbidden for '
                                'resourceVersion "0"',
                                "resourceVersionMatch",
                            )
                        ]
                    )
                if wanted > self.store.resource_version:
                    raise timeout(
                        f"Too large resource version: {wanted}, current: "
                        f"{self.store.resource_version}",
                        1,
                    )
                at_rv = wanted
            elif wanted > self.store.resource_version:
                raise timeout(
                    f"Too large resource version: {wanted}, current: {self.store.resource_version}",
                    1,
                )
            if at_rv is not None and at_rv < self.store.oldest_rv:
                raise gone("The resourceVersion for the provided list is too old.")
        page = self.store.select(
            target.rt,
            target.namespace,
            match,
            at_rv=at_rv,
            after=after,
            limit=limit if limit and limit > 0 else None,
            exact_name=exact_name if at_rv is None else None,
        )
        continue_token = (
            encode_continue(page.resource_version, page.next_key) if page.next_key else None
        )
        if _wants_table(request):
            return json_response(
                tables.table(
                    rt.kind,
                    page.items,
                    resource_version=str(page.resource_version),
                    continue_token=continue_token,
                    include_object=q.get("includeObject", "Metadata"),
                )
            )
        meta: dict[str, Any] = {"resourceVersion": str(page.resource_version)}
        if continue_token:
            meta["continue"] = continue_token
            if match is None:
                meta["remainingItemCount"] = page.remaining
        head = (
            b'{"kind":"'
            + rt.list_kind.encode()
            + b'","apiVersion":"'
            + rt.api_version.encode()
            + b'","metadata":'
            + encode(meta)
            + b',"items":['
        )
        items = b",".join(self.store.encoded_item(rt, o) for o in page.items)
        return web.Response(body=head + items + b"]}", content_type=_JSON)

    async def watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        q = request.query
        match, _ = self._list_options(request, target)
        if target.name is not None:
            from kubesim.selectors import FieldRequirement, FieldSelector

            by_name = FieldSelector([FieldRequirement("metadata.name", False, target.name)])
            label = parse_label_selector(q.get("labelSelector"))
            field = parse_field_selector(q.get("fieldSelector"), target.rt.kind)
            field.requirements.extend(by_name.requirements)
            match = matcher(label, field)
        send_initial = _flag(q.get("sendInitialEvents"))
        rv_text = q.get("resourceVersion")
        if send_initial and q.get("resourceVersionMatch") != "NotOlderThan":
            raise invalid_list_options(
                [
                    cause(
                        "FieldValueForbidden",
                        "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                        "NotOlderThan",
                        "sendInitialEvents",
                    )
                ]
            )
        if q.get("resourceVersionMatch") and not send_initial:
            raise invalid_list_options(
                [
                    cause(
                        "FieldValueForbidden",
                        "Forbidden: resourceVersionMatch is forbidden for watch unless "
                        "sendInitialEvents is provided",
                        "resourceVersionMatch",
                    )
                ]
            )
        if rv_text is not None and rv_text != "":
            try:
                int(rv_text)
            except ValueError:
                raise bad_request(
                    f'resourceVersion: Invalid value: "{rv_text}": must be a valid integer'
                ) from None
        timeout_s = _int_param(request, "timeoutSeconds")
        watch_request = WatchRequest(
            rt=target.rt,
            namespace=target.namespace,
            match=match,
            resource_version=rv_text,
            timeout=float(timeout_s) if timeout_s and timeout_s > 0 else DEFAULT_TIMEOUT,
            bookmarks=_flag(q.get("allowWatchBookmarks")),
            send_initial_events=send_initial,
            as_table=_wants_table(request),
            include_object=q.get("includeObject", "Metadata"),
        )
        watcher = Watcher(self.store, watch_request, self.config.bookmark_interval)
        return await watcher.serve(request)

    async def log(self, request: web.Request, target: Target) -> web.StreamResponse:
        q = request.query
        if self.store.peek(target.rt, target.namespace, target.name or "") is None:
            from kubesim.errors import not_found

            raise not_found(target.rt, target.name or "")
        if self.cluster is None:
            return web.Response(text="", content_type="text/plain")
        container = q.get("container") or None
        tail = _int_param(request, "tailLines")
        stamps = _flag(q.get("timestamps"))
        lines = self.cluster.pod_log(
            target.namespace, target.name, container, tail_lines=tail, timestamps=stamps
        )
        pod = self.store.peek(target.rt, target.namespace, target.name or "")
        if pod is not None and not (pod.get("spec") or {}).get("nodeName"):
            # no node to ask yet: the real server answers with no content at all
            return web.Response(status=204)
        if not _flag(q.get("follow")):
            text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
            return web.Response(text=text, content_type="text/plain")
        resp = web.StreamResponse()
        resp.content_type = "text/plain"
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            for line in lines:
                await resp.write((line if line.endswith("\n") else line + "\n").encode())
            async for line in self.cluster.follow_log(target.namespace, target.name, container):
                await resp.write((line if line.endswith("\n") else line + "\n").encode())
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        return resp

    def _check_immutable(self, target: Target, obj: Obj) -> None:
        """What a user may change in a stored pod's spec (the real ValidatePodUpdate)."""
        if target.rt.kind != "Pod":
            return
        current = self.store.peek(target.rt, target.namespace, target.name or "")
        if current is None:
            return
        candidate = json.loads(json.dumps(obj))
        defaults.apply(target.rt, candidate, current)
        validation.validate_pod_update(candidate, current)

    # -- the scale subresource (autoscaling/v1 Scale) --------------------------------------

    @staticmethod
    def _as_scale(obj: Obj) -> Obj:
        meta = obj["metadata"]
        selector = selector_from_match((obj.get("spec") or {}).get("selector"))
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                              "creationTimestamp") if k in meta},
            "spec": {"replicas": int((obj.get("spec") or {}).get("replicas", 0))},
            "status": {"replicas": int((obj.get("status") or {}).get("replicas") or 0),
                       "selector": str(selector)},
        }

    async def scale(self, request: web.Request, target: Target) -> web.Response:
        """GET, PUT or PATCH `…/scale`: read or set spec.replicas through a Scale."""
        from kubesim.errors import not_found

        rt, name = target.rt, target.name or ""
        current = self.store.peek(rt, target.namespace, name)
        if current is None:
            raise not_found(rt, name)
        scale = self._as_scale(current)
        if request.method == "GET":
            return json_response(scale)
        if request.method == "PUT":
            wanted = await self._read_object(request)
        else:
            kind = _PATCH_TYPES.get(request.content_type)
            if kind is None or kind == "apply":
                raise unsupported_media_type(request.content_type)
            body = decode_object(await read_body(request), _JSON)
            wanted = (patch.json_patch(scale, body) if kind == "json"
                      else patch.merge_patch(scale, body))
        if not isinstance(wanted, dict):
            raise bad_request("the body must be a Scale object")
        replicas = (wanted.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise validation_error_for_scale(replicas)
        sent_rv = (wanted.get("metadata") or {}).get("resourceVersion")
        new = {**current, "spec": {**(current.get("spec") or {}), "replicas": replicas}}
        if sent_rv:
            new["metadata"] = {**current["metadata"], "resourceVersion": sent_rv}
        updated = self.store.update(rt, new, check_rv=bool(sent_rv), dry_run=_dry_run(request))
        return json_response(self._as_scale(updated))

    # -- writes ----------------------------------------------------------------------------

    async def _read_object(self, request: web.Request) -> Any:
        content_type = request.content_type
        if "Content-Type" not in request.headers or content_type in ("*/*", "text/plain"):
            content_type = _JSON  # no declared type: read JSON, as most clients mean
        if content_type == _PROTOBUF:
            return protobuf.decode_object(await read_body(request))
        if content_type not in (_JSON, "application/yaml"):
            raise unsupported_media_type(content_type)
        return decode_object(await read_body(request), content_type)

    async def create(self, request: web.Request, target: Target) -> web.Response:
        obj = await self._read_object(request)
        _check_object(target.rt, obj, target, for_update=False)
        warnings = validation.validate(target.rt, obj, field_validation=_field_validation(request))
        created = self.store.create(
            target.rt, obj, namespace=target.namespace, dry_run=_dry_run(request)
        )
        return json_response(created, status=201, headers=_warning_headers(warnings))

    async def update(self, request: web.Request, target: Target) -> web.Response:
        obj = await self._read_object(request)
        _check_object(target.rt, obj, target, for_update=True)
        meta = obj.setdefault("metadata", {})
        if target.rt.namespaced:
            meta["namespace"] = target.namespace
        sub = target.subresource if target.subresource in ("status",) else None
        warnings = validation.validate(target.rt, obj, field_validation=_field_validation(request))
        if sub is None:
            self._check_immutable(target, obj)
        updated = self.store.update(target.rt, obj, subresource=sub, dry_run=_dry_run(request))
        return json_response(updated, headers=_warning_headers(warnings))

    async def patch(self, request: web.Request, target: Target) -> web.Response:
        rt, name = target.rt, target.name or ""
        kind = _PATCH_TYPES.get(request.content_type)
        if kind is None:
            raise unsupported_media_type(request.content_type)
        body = decode_object(
            await read_body(request), "application/apply-patch+yaml" if kind == "apply" else _JSON
        )
        current = self.store.peek(rt, target.namespace, name)
        dry_run = _dry_run(request)
        field_validation = _field_validation(request)
        _check_patch_options(kind, request)
        if current is None:
            if kind != "apply":
                from kubesim.errors import not_found

                raise not_found(rt, name)
            # Server-side apply creates what does not exist yet.
            _check_object(rt, body, target, for_update=True)
            warnings = validation.validate(rt, body, field_validation=field_validation)
            created = self.store.create(rt, body, namespace=target.namespace, dry_run=dry_run)
            return json_response(created, status=201, headers=_warning_headers(warnings))
        if kind == "json":
            merged = patch.json_patch(current, body)
        else:
            if not isinstance(body, dict):
                raise bad_request(
                    "json: cannot unmarshal array into Go value of type map[string]interface {}"
                )
            if kind == "apply":
                _check_object(rt, body, target, for_update=True)
            merged = (
                patch.strategic_merge(current, body)
                if kind in ("strategic", "apply")
                else patch.merge_patch(current, body)
            )
        if not isinstance(merged, dict) or not isinstance(merged.get("metadata"), dict):
            raise bad_request("the patch produced an object without metadata")
        merged["kind"], merged["apiVersion"] = rt.kind, rt.api_version
        merged["metadata"]["name"] = name
        if rt.namespaced:
            merged["metadata"]["namespace"] = target.namespace
        # A patch only conflicts when it names a resourceVersion itself.
        sent_rv = (
            (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        )
        if kind == "json":
            sent_rv = merged["metadata"].get("resourceVersion")
            if sent_rv == current["metadata"]["resourceVersion"]:
                sent_rv = None
        if not sent_rv:
            merged["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        warnings = validation.validate(rt, merged, field_validation=field_validation)
        sub = "status" if target.subresource == "status" else None
        if sub is None:
            self._check_immutable(target, merged)
        updated = self.store.update(rt, merged, subresource=sub, check_rv=True, dry_run=dry_run)
        return json_response(updated, headers=_warning_headers(warnings))

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        options: dict[str, Any] = {}
        data = await read_body(request)
        if data.strip():
            body = decode_object(data, _JSON)
            if not isinstance(body, dict):
                raise bad_request("DeleteOptions must be a JSON object")
            options.update(body)
        q = request.query
        if "propagationPolicy" in q:
            options["propagationPolicy"] = q["propagationPolicy"]
        if "gracePeriodSeconds" in q:
            options["gracePeriodSeconds"] = _int_param(request, "gracePeriodSeconds")
        if "orphanDependents" in q:
            options["orphanDependents"] = _flag(q["orphanDependents"])
        if q.getall("dryRun", []):
            options["dryRun"] = q.getall("dryRun")
        policy = options.get("propagationPolicy")
        if policy is None:
            orphan = options.get("orphanDependents")
            policy = "Orphan" if orphan else "Background"
        if policy not in _PROPAGATION:
            raise invalid_list_options(
                [
                    cause(
                        "FieldValueNotSupported",
                        f'Unsupported value: "{policy}": supported values: "Foreground", '
                        '"Background", "Orphan"',
                        "propagationPolicy",
                    )
                ]
            )
        options["propagationPolicy"] = policy
        for v in options.get("dryRun") or ():
            if v != "All":
                raise bad_request(f'Invalid dry run value "{v}": supported values: "All"')
        return options

    def _delete_one(self, target: Target, name: str, options: dict[str, Any]) -> Obj:
        return self.store.delete(
            target.rt,
            target.namespace,
            name,
            propagation=options["propagationPolicy"],
            grace=options.get("gracePeriodSeconds"),
            dry_run=bool(options.get("dryRun")),
            preconditions=options.get("preconditions"),
        )

    async def delete(self, request: web.Request, target: Target) -> web.Response:
        options = await self._delete_options(request)
        rt = target.rt
        last = self._delete_one(target, target.name or "", options)
        if rt.kind in ("Pod", "Namespace") or self.store.is_stored(rt, last):
            # Objects that go through graceful deletion or wait on finalizers come back whole.
            return json_response(last, status=200)
        details: dict[str, Any] = {"name": target.name}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        details["uid"] = last["metadata"].get("uid")
        return json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
        )

    async def delete_collection(self, request: web.Request, target: Target) -> web.Response:
        options = await self._delete_options(request)
        match, exact_name = self._list_options(request, target)
        page = self.store.select(target.rt, target.namespace, match, exact_name=exact_name)
        deleted = []
        for obj in list(page.items):
            name = obj["metadata"]["name"]
            ns = obj["metadata"].get("namespace")
            one = Target(target.rt, ns, name, None, False)
            try:
                deleted.append(self._delete_one(one, name, options))
            except ApiError as e:
                if e.code != 404:
                    raise
        rt = target.rt
        body = {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(self.store.resource_version)},
            "items": [
                {k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in deleted
            ],
        }
        return json_response(body)


# ----------------------------------------------------------------------------- other endpoints


async def _version(request: web.Request) -> web.Response:
    return json_response(discovery.version_info())


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="ok", content_type="text/plain")


async def _openapi_root(request: web.Request) -> web.Response:
    return web.Response(body=openapi.root_document(), content_type=_JSON)


async def _openapi_gv(request: web.Request) -> web.Response:
    parts = request.match_info["tail"].strip("/").split("/")
    if parts[0] == "api" and len(parts) == 2:
        doc = openapi.group_version_document("", parts[1])
    elif parts[0] == "apis" and len(parts) == 3:
        doc = openapi.group_version_document(parts[1], parts[2])
    else:
        doc = None
    if doc is None:
        raise path_not_found()
    return web.Response(body=doc, content_type=_JSON)


async def _metrics(request: web.Request) -> web.Response:
    cluster = request.app[CLUSTER]
    text = cluster.render_metrics() if cluster is not None else ""
    return web.Response(
        text=text,
        content_type="text/plain",
        charset="utf-8",
        headers={"X-Content-Type-Options": "nosniff"},
    )


async def _not_found(request: web.Request) -> web.Response:
    raise path_not_found()


def load_cluster_class() -> Any:
    """The simulated cluster (the other half of kubesim), if it is there."""
    try:
        from kubesim.cluster import Cluster
    except ImportError as e:
        if e.name not in ("kubesim.cluster",):
            raise
        log.warning("kubesim.cluster is not available: serving the API without a cluster")
        return None
    return Cluster


def ensure_builtin_namespaces(store: Store) -> None:
    from kubesim.resources import by_kind

    ns_rt = by_kind("Namespace")
    for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
        if store.peek(ns_rt, None, name) is None:
            store.create(ns_rt, {"metadata": {"name": name}})


def create_app(
    config: SimConfig, store: Store | None = None, *, with_cluster: bool = True
) -> web.Application:
    store = store or Store(config)
    ensure_builtin_namespaces(store)
    cluster = None
    cluster_class = load_cluster_class() if with_cluster else None
    if cluster_class is not None:
        try:
            cluster = cluster_class(store, config)
        except ImportError:
            # The cluster half is still being written: serve the API alone meanwhile.
            log.exception("kubesim.cluster could not start: serving the API without a cluster")
    app = web.Application(
        middlewares=[errors_middleware, auth_middleware],
        client_max_size=config.max_body_bytes,
    )
    app[STORE] = store
    app[CONFIG] = config
    app[CLUSTER] = cluster
    app["stopping"] = asyncio.Event()
    handlers = ApiHandlers(store, config, cluster)
    app.router.add_get("/version", _version)
    app.router.add_get("/version/", _version)
    for path in ("/healthz", "/readyz", "/livez"):
        app.router.add_get(path, _health)
    app.router.add_get("/openapi/v3", _openapi_root)
    app.router.add_get("/openapi/v3/{tail:.*}", _openapi_gv)
    app.router.add_get("/metrics", _metrics)
    app.router.add_route("*", "/api", handlers.core)
    app.router.add_route("*", "/api/{tail:.*}", handlers.core)
    app.router.add_route("*", "/apis", handlers.groups)
    app.router.add_route("*", "/apis/{tail:.*}", handlers.groups)
    if cluster is not None:
        app.router.add_routes(cluster.control_routes())
    app.router.add_route("*", "/{tail:.*}", _not_found)

    async def on_startup(app: web.Application) -> None:
        if cluster is not None:
            await cluster.start()

    async def on_shutdown(app: web.Application) -> None:
        app["stopping"].set()
        store.change_signal().set()  # wake every watcher so it sees `stopping`

    async def on_cleanup(app: web.Application) -> None:
        if cluster is not None:
            await cluster.stop()

    app.on_startup.append(on_startup)
    app.on_shutdown.append(on_shutdown)
    app.on_cleanup.append(on_cleanup)
    return app
