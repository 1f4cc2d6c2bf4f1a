"""Sign-in pages: login, logout, the project switcher (URL names global: templates and the
login redirects name them `login`, `logout`, `switch-project`)."""

from django.urls import path

from . import views

urlpatterns = [
    path("login/", views.login_view, name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("switch-project/", views.switch_project_view, name="switch-project"),
]
