"""`files.list` takes what OpenAI's does: `order` (asc or desc, newest first by default), `after` in either
order, and `limit` up to 10,000; a value outside them is a 400 naming the field and the range."""

import json

import openai
import pytest

from clusterpanel.accounts.models import ApiToken

LINE = json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                   "body": {"messages": [{"role": "user", "content": "Hi"}]}}).encode()


@pytest.fixture
def client(ready, web_server, bob) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(bob, "client")[1], max_retries=0)


def test_files_are_listed_in_the_order_asked_for_page_by_page(client):
    made = [client.files.create(file=(f"q{n}.jsonl", LINE), purpose="batch").id for n in range(3)]
    assert [f.id for f in client.files.list()] == made[::-1], "newest first unless asked"
    first = client.files.list(order="asc", limit=2)
    assert [f.id for f in first.data] == made[:2] and first.has_more
    assert [f.id for f in client.files.list(order="asc", after=made[0])] == made[1:]
    assert [f.id for f in client.files.list(order="desc", after=made[2])] == made[1::-1]
    assert [f.id for f in client.files.list(order="asc", limit=2)] == made, "the client pages on with `after`"
    assert len(client.files.list(limit=10_000).data) == 3


@pytest.mark.parametrize("query, param, said", [({"order": "sideways"}, "order", "order must be asc or desc"),
                                                ({"limit": 10_001}, "limit", "from 1 to 10,000"),
                                                ({"limit": 0}, "limit", "from 1 to 10,000")])
def test_a_list_query_outside_openais_is_a_400_naming_it(client, query, param, said):
    with pytest.raises(openai.BadRequestError) as refused:
        client.files.list(**query)
    assert refused.value.body["param"] == param and said in refused.value.body["message"]
