from django import forms
from django.conf import settings


class LoginForm(forms.Form):
    username = forms.CharField(label="User name", max_length=255,
                               widget=forms.TextInput(attrs={"autocomplete": "username", "autofocus": True}))
    password = forms.CharField(label="Password", max_length=4096, strip=False,
                               widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}))
    domain = forms.CharField(label="Domain", max_length=255, required=False,
                             help_text="Your OpenStack user domain.")

    def clean_domain(self) -> str:
        domain: str = self.cleaned_data.get("domain") or settings.KEYSTONE_DEFAULT_DOMAIN
        return domain


class SwitchProjectForm(forms.Form):
    project_id = forms.CharField(max_length=64)
    next = forms.CharField(max_length=2000, required=False)
