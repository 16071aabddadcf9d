"""Form fields that choose rows by id, refusing what is not an id before the database is asked.

Django's model choice fields pass whatever was posted to a query: SQLite raises OverflowError (a 500) for an
integer past 2**63, where any other wrong value is "not one of the available choices".
"""

from django import forms
from django.core.exceptions import ValidationError


def plain_id(value) -> bool:
    """ASCII digits that fit a database id (str.isdigit() also takes "²")."""
    text = str(value)
    return text.isascii() and text.isdigit() and len(text) <= 18


class IdChoiceField(forms.ModelChoiceField):
    def to_python(self, value):
        if value not in self.empty_values and not plain_id(value):
            raise ValidationError(self.error_messages["invalid_choice"], code="invalid_choice")
        return super().to_python(value)


class IdMultipleChoiceField(forms.ModelMultipleChoiceField):
    def _check_values(self, value):
        for pk in value if isinstance(value, list | tuple) else ():
            if not plain_id(pk):
                raise ValidationError(self.error_messages["invalid_pk_value"], code="invalid_pk_value",
                                      params={"pk": pk})
        return super()._check_values(value)
