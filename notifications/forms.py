"""The pages' forms: a webhook to add (the URL checked as the API checks it)."""

from __future__ import annotations

from django import forms

from .models import Kind


class WebhookForm(forms.Form):
    url = forms.CharField(label="URL", max_length=500,
                          help_text="https://…: Slack, Mattermost or your own receiver")
    kinds = forms.MultipleChoiceField(choices=Kind.choices, required=False,
                                      widget=forms.CheckboxSelectMultiple,
                                      help_text="none ticked: every kind")
    project = forms.BooleanField(required=False, label="for the whole project")
