"""The file browser (`/volumes/{id}/files/?path=DIR`): a folder's entries with download links,
make a folder, rename or move, delete; uploads go from the page's script straight to the API
(PUT …/files/content, streamed from the browser's File, never through a form)."""

from __future__ import annotations

import posixpath
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from identity.access import project_required, tenant_required
from identity.scoping import Action
from tenants.middleware import TenantRequest

from . import services, volumes
from .forms import DeleteForm, FolderForm, MoveForm
from .forwarding import FilesError
from .server import FileServerUnavailable
from .volumes import VolumeFiles, VolumeRefused, VolumeUnknown


def _volume(request: TenantRequest, volume_id: int) -> VolumeFiles:
    try:
        return volumes.volume_files(identity=request.identity, tenant=request.tenant,
                                    volume_id=volume_id)
    except VolumeUnknown:
        raise Http404("No volume with this id.") from None


def _here(volume_id: int, path: str) -> str:
    url = reverse("files:browser", args=[volume_id])
    return f"{url}?{urlencode({'path': path})}" if path else url


def crumbs(path: str) -> list[tuple[str, str]]:
    """(name, path) of each folder from the top down to `path`."""
    parts = [part for part in path.split("/") if part]
    return [(part, "/".join(parts[:i + 1])) for i, part in enumerate(parts)]


@project_required
@require_http_methods(["GET", "POST"])
@tenant_required(Action.VIEW)
def browser(request: TenantRequest, id: int) -> HttpResponse:  # the URL's {id}
    volume = _volume(request, id)
    path = request.GET.get("path", "")[:4096].strip("/")
    if request.method == "POST":
        _change(request, volume, path)
        return HttpResponseRedirect(_here(id, path))
    entries, error = [], ""
    try:
        entries = services.files_list(volume=volume, path=path)
    except (FilesError, FileServerUnavailable) as exc:
        error = str(exc)
    api = reverse("api:volume-file-content", args=[id])
    for entry in entries:
        full = posixpath.join(path, entry["name"]) if path else entry["name"]
        entry["path"] = full
        entry["href"] = (_here(id, full) if entry["type"] == "directory"
                         else f"{api}?{urlencode({'path': full})}")
    return render(request, "files/browser.html", {
        "volume": volume, "volume_id": id, "path": path, "crumbs": crumbs(path),
        "entries": entries, "error": error, "upload_url": api,
        "parent": _here(id, posixpath.dirname(path)) if path else None})


def _change(request: TenantRequest, volume: VolumeFiles, here: str) -> None:
    """One change from the page's forms; what it did or why not, as a message."""
    action = request.POST.get("action")
    try:
        if action == "folder" and (form := FolderForm(request.POST)).is_valid():
            target = posixpath.join(here, form.cleaned_data["path"])
            services.files_folder_make(user=request.user, volume=volume, path=target)
            messages.success(request, f"Made the folder {target}.")
        elif action == "move" and (move := MoveForm(request.POST)).is_valid():
            services.files_move(user=request.user, volume=volume,
                                source=move.cleaned_data["source"], target=move.cleaned_data["to"])
            messages.success(request, f"Moved {move.cleaned_data['source']} to "
                                      f"{move.cleaned_data['to']}.")
        elif action == "delete" and (delete := DeleteForm(request.POST)).is_valid():
            services.files_delete(user=request.user, volume=volume,
                                  path=delete.cleaned_data["path"],
                                  recursive=delete.cleaned_data["recursive"])
            messages.success(request, f"Deleted {delete.cleaned_data['path']}.")
        else:
            messages.error(request, "That change is not one this page makes.")
    except (FilesError, FileServerUnavailable, VolumeRefused) as exc:
        messages.error(request, str(exc))
