"""/api/v1/volumes/{id}/files/: a volume's files through the project's file server.

    GET    files/?path=DIR                  the folder's entries
    GET    files/content?path=FILE          the file (streamed; Range, If-Range honoured)
    PUT    files/content?path=FILE          write it whole from the body (streamed)
    DELETE files/content?path=P[&recursive=true]   a file, an empty folder, or a whole one
    POST   files/folders/ {path}            make a folder
    POST   files/moves/ {from, to}          rename or move, inside the volume

A path that leaves the volume (`..`, absolute, a link that points out) is 400 path_outside.
"""

from __future__ import annotations

from typing import Any, cast

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tenants.authentication import TenantAPIRequest

from .. import services, volumes
from ..forwarding import REQUEST_HEADERS, FilesError, download_headers, upload_body
from ..server import FileServerUnavailable
from ..volumes import VolumeFiles, VolumeRefused, VolumeUnknown
from .serializers import (
    DeleteQuerySerializer,
    EntrySerializer,
    FileQuerySerializer,
    FolderSerializer,
    ListQuerySerializer,
    MoveSerializer,
)

RETRY_AFTER_SECONDS = 5


class FilesRefused(exceptions.APIException):
    """The file server's refusal (or its absence) in the API's error shape."""

    def __init__(self, status_code: int, code: str, detail: str) -> None:
        self.status_code = status_code
        if status_code == status.HTTP_503_SERVICE_UNAVAILABLE:
            self.wait = RETRY_AFTER_SECONDS  # DRF's Retry-After
        super().__init__(detail, code)


class VolumeFilesView(APIView):
    """The volume of the URL as the caller sees it, and every refusal as the API's error."""

    request: TenantAPIRequest

    def volume(self, volume_id: int) -> VolumeFiles:
        if self.request.tenant is None:
            raise exceptions.NotFound("No volume with this id.")
        try:
            return volumes.volume_files(identity=self.request.identity,
                                        tenant=self.request.tenant, volume_id=volume_id)
        except VolumeUnknown:
            raise exceptions.NotFound("No volume with this id.") from None

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, FilesError):
            exc = FilesRefused(exc.status, exc.code, exc.detail)
        elif isinstance(exc, FileServerUnavailable):
            exc = FilesRefused(503, "files_unavailable", str(exc))
        elif isinstance(exc, VolumeRefused):
            exc = exceptions.PermissionDenied(str(exc))
        return super().handle_exception(exc)

    def query(self, serializer_class: type, request: Request) -> dict[str, Any]:
        serializer = serializer_class(data=request.query_params)
        serializer.is_valid(raise_exception=True)
        return cast(dict[str, Any], serializer.validated_data)


PATH = OpenApiParameter("path", str, description="a path inside the volume")
ERRORS = {400: OpenApiResponse(description="a path that leaves the volume: path_outside"),
          409: OpenApiResponse(description="the volume is not bound yet: volume_not_bound"),
          503: OpenApiResponse(description="the file server is starting: retry after "
                                           "Retry-After")}


class FileListView(VolumeFilesView):
    @extend_schema(parameters=[OpenApiParameter("path", str, description="a folder inside the "
                                                "volume (default: its top)")],
                   responses={200: EntrySerializer(many=True), **ERRORS})
    def get(self, request: TenantAPIRequest, id: int) -> Response:
        """The folder's entries, folders first."""
        volume = self.volume(id)
        query = self.query(ListQuerySerializer, request)
        return Response(services.files_list(volume=volume, path=query["path"]))


class FileContentView(VolumeFilesView):
    @extend_schema(parameters=[PATH], responses={
        (200, "application/octet-stream"): OpenApiTypes.BINARY,
        (206, "application/octet-stream"): OpenApiTypes.BINARY,
        304: OpenApiResponse(description="If-None-Match or If-Modified-Since: not changed"),
        416: OpenApiResponse(description="a Range outside the file"), **ERRORS})
    def get(self, request: TenantAPIRequest, id: int) -> StreamingHttpResponse:
        """The file, streamed; a Range asks for a part of it."""
        volume = self.volume(id)
        query = self.query(FileQuerySerializer, request)
        headers = {name: value for name in REQUEST_HEADERS
                   if (value := request.headers.get(name)) is not None}
        upstream, body = services.files_download(volume=volume, path=query["path"],
                                                 headers=headers)
        response = StreamingHttpResponse(body, status=upstream.status)
        for name, value in download_headers(upstream).items():
            response[name] = value
        return response

    @extend_schema(parameters=[PATH], request={"application/octet-stream": OpenApiTypes.BINARY},
                   responses={201: EntrySerializer, 411: OpenApiResponse(description="no length"),
                              413: OpenApiResponse(description="over the site's upload size"),
                              **ERRORS})
    def put(self, request: TenantAPIRequest, id: int) -> Response:
        """Write the file from the body, whole: it takes its name once all of it is there."""
        volume = self.volume(id)
        query = self.query(FileQuerySerializer, request)
        entry = services.files_upload(user=request.user, volume=volume, path=query["path"],
                                      body=upload_body(request._request))
        return Response(entry, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[PATH, OpenApiParameter("recursive", bool, description=(
        "delete a folder with everything in it"))], responses={204: None, **ERRORS})
    def delete(self, request: TenantAPIRequest, id: int) -> Response:
        """Delete a file or an empty folder; a folder with things in it only with recursive."""
        volume = self.volume(id)
        query = self.query(DeleteQuerySerializer, request)
        services.files_delete(user=request.user, volume=volume, path=query["path"],
                              recursive=query["recursive"])
        return Response(status=status.HTTP_204_NO_CONTENT)


class FolderView(VolumeFilesView):
    @extend_schema(request=FolderSerializer, responses={201: EntrySerializer, **ERRORS})
    def post(self, request: TenantAPIRequest, id: int) -> Response:
        """Make a folder (its parent must be there)."""
        volume = self.volume(id)
        serializer = FolderSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        entry = services.files_folder_make(user=request.user, volume=volume,
                                           path=serializer.validated_data["path"])
        return Response(entry, status=status.HTTP_201_CREATED)


class MoveView(VolumeFilesView):
    @extend_schema(request=MoveSerializer, responses={200: EntrySerializer, **ERRORS})
    def post(self, request: TenantAPIRequest, id: int) -> Response:
        """Rename or move a file or folder inside the volume; never over what has the name."""
        volume = self.volume(id)
        serializer = MoveSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        entry = services.files_move(user=request.user, volume=volume,
                                    source=serializer.validated_data["from"],
                                    target=serializer.validated_data["to"])
        return Response(entry)
