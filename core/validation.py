"""The one shape of a refused write: `FieldsInvalid(errors)`, each field → what is wrong with it.

The domains' validations (a launch, a quota, a budget, notification preferences) raise a subclass;
the API turns `errors` into its 400 `fields`, the pages into their forms' messages.
"""

from __future__ import annotations


class FieldsInvalid(ValueError):
    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{field}: {' '.join(messages)}"
                                   for field, messages in errors.items()))
        self.errors = errors
