"""Names that become part of a URL must not be taken by a page of their own.

`/nodes/<name>/` for a laptop named "add" is the Add laptop page, so that
laptop's page could never be reached. Rather than list such words by hand, a
name is tried against the URL patterns themselves: every route of the app that
takes the name must lead back to itself with that name. A route added later is
covered without anyone remembering to add a word.
"""

import uuid

from django.core.exceptions import ValidationError
from django.urls import NoReverseMatch, Resolver404, get_resolver, resolve, reverse
from django.urls.converters import IntConverter, UUIDConverter
from django.urls.resolvers import URLPattern
from django.utils.deconstruct import deconstructible

SAMPLES = {IntConverter: 1, UUIDConverter: uuid.UUID(int=1)}


def routes_taking(namespace: str, kwarg: str) -> list[URLPattern]:
    """The named routes of `namespace` whose URL holds `kwarg`."""
    _, resolver = get_resolver().namespace_dict[namespace]
    return [route for route in resolver.url_patterns
            if isinstance(route, URLPattern) and route.name and kwarg in getattr(route.pattern, "converters", {})]


def taken_url(namespace: str, kwarg: str, value: str) -> str | None:
    """A URL meant for `value` that some other page answers instead; None when every route reaches it."""
    for route in routes_taking(namespace, kwarg):
        view = f"{namespace}:{route.name}"
        kwargs = {name: SAMPLES.get(type(converter), "x") for name, converter in route.pattern.converters.items()}
        kwargs[kwarg] = value
        try:
            url = reverse(view, kwargs=kwargs)
        except NoReverseMatch:
            continue  # not a name of that shape at all: the field's other validators say why
        try:
            match = resolve(url)
        except Resolver404:
            return url
        if match.view_name != view or match.kwargs.get(kwarg) != value:
            return url
    return None


@deconstructible
class NotARoute:
    """Refuses a name whose page would be another page of the panel (`NotARoute("nodes", "name")`)."""

    def __init__(self, namespace: str, kwarg: str = "name") -> None:
        self.namespace, self.kwarg = namespace, kwarg

    def __call__(self, value: str) -> None:
        # `Add` reaches its own page, but reads as the Add page's name: names differing in case only go together
        url = taken_url(self.namespace, self.kwarg, value) or taken_url(self.namespace, self.kwarg, value.lower())
        if url:
            raise ValidationError(f"The name {value} is taken by another page of the panel ({url}); "
                                  "choose another name.", code="reserved")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NotARoute) and (self.namespace, self.kwarg) == (other.namespace, other.kwarg)
