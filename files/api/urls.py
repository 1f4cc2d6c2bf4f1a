from django.urls import path

from . import views

urlpatterns = [
    path("volumes/<int:id>/files/", views.FileListView.as_view(), name="volume-files"),
    path("volumes/<int:id>/files/content", views.FileContentView.as_view(),
         name="volume-file-content"),
    path("volumes/<int:id>/files/folders/", views.FolderView.as_view(),
         name="volume-file-folders"),
    path("volumes/<int:id>/files/moves/", views.MoveView.as_view(),
         name="volume-file-moves"),
]
