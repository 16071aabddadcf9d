"""/v1/embeddings with the official `openai` client and Ollama's embed with the `ollama` client, on the bundled chat
model: a vector per input, the model's width, length 1, the same numbers llama.cpp's own mean pooling gives, the
same whether read alone, in a list or beside a streaming chat; float and base64 alike; bad input refused in words
with nothing queued; a batch of embedding lines."""

import json
import threading

import numpy as np
import ollama
import openai
import pytest
from django.test import Client

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job
from models_app.library.adding import ensure_bundled
from tests.jobs.api.conftest import client_for, cosine

pytestmark = pytest.mark.timeout(300)
TEXTS = ["The cat sat on the mat.", "A kitten was sitting on the rug.", "Quarterly tax returns are due in April."]


def test_a_vector_per_input_as_llama_cpp_pools_it_float_or_base64(on_the_head, web_server, bob, llama_cpp_mean):
    client, model = client_for(web_server, bob), on_the_head.model
    found = client.embeddings.create(model=model.name, input=TEXTS, encoding_format="float")
    vectors = [np.array(item.embedding) for item in found.data]
    assert [item.index for item in found.data] == [0, 1, 2] and found.model == model.name
    assert all(len(v) == model.n_embd and abs(np.linalg.norm(v) - 1) < 1e-4 for v in vectors)
    assert found.usage.prompt_tokens == found.usage.total_tokens > len(TEXTS)
    for text, vector in zip(TEXTS, vectors, strict=True):
        assert cosine(vector, llama_cpp_mean(text)) > 0.999, text
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2]), "cats are nearer each other than taxes"

    packed = client.embeddings.create(model=model.name, input=TEXTS[1])  # the client asks for base64 by default
    assert np.allclose(packed.data[0].embedding, vectors[1], atol=1e-6), "alone or in a list, base64 or float"

    tokens = client.embeddings.create(model=model.name, input=[[1, 504, 2495]], encoding_format="float")
    assert len(tokens.data[0].embedding) == model.n_embd and tokens.usage.prompt_tokens == 3


def test_a_vector_read_beside_a_streaming_chat_is_the_one_read_alone(on_the_head, web_server, bob):
    client, model = client_for(web_server, bob), on_the_head.model.name
    alone = client.embeddings.create(model=model, input=TEXTS[0], encoding_format="float").data[0].embedding
    streaming, pieces = threading.Event(), []

    def chat() -> None:
        for chunk in client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Count."}],
                                                    max_tokens=48, temperature=0, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
                streaming.set()

    talker = threading.Thread(target=chat)
    talker.start()
    assert streaming.wait(120), "the chat streams"
    beside = [client.embeddings.create(model=model, input=TEXTS[0], encoding_format="float").data[0].embedding
              for _ in range(3)]
    talker.join(120)
    assert all(np.allclose(vector, alone, atol=1e-6) for vector in beside)
    plain = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Count."}],
                                           max_tokens=48, temperature=0)
    assert "".join(pieces) == plain.choices[0].message.content, "the chat's answer is untouched by the vectors"


@pytest.mark.parametrize(("fields", "param"), [
    ({"input": ""}, "input"), ({"input": []}, "input"), ({"input": [["a"]]}, "input"),
    ({"input": "x", "dimensions": 64}, "dimensions"), ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
])
def test_bad_input_is_refused_in_words_with_nothing_queued(on_the_head, web_server, bob, fields, param):
    client = client_for(web_server, bob)
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model=on_the_head.model.name, **fields)
    assert refused.value.body["param"] == param and len(refused.value.body["message"]) > 20, refused.value.body
    assert not Job.objects.exists()


def test_an_input_longer_than_the_context_or_outside_the_vocabulary_is_a_400(on_the_head, web_server, bob):
    client = client_for(web_server, bob)
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model=on_the_head.model.name, input=["short", "word " * 800])
    assert refused.value.body["code"] == "context_length_exceeded" and "input[1]" in refused.value.body["message"]
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model=on_the_head.model.name, input=[[5, 10 ** 7]])
    assert "vocabulary" in refused.value.body["message"] and refused.value.body["param"] == "input"


def test_ollama_embed_gives_the_vectors_v1_gives(on_the_head, web_server, bob):
    model = on_the_head.model.name
    client = ollama.Client(host=f"{web_server}/ollama",
                           headers={"Authorization": f"Bearer {ApiToken.issue(bob, 'ollama')[1]}"})
    found = client.embed(model=model, input=TEXTS[:2])
    v1 = client_for(web_server, bob).embeddings.create(model=model, input=TEXTS[:2], encoding_format="float")
    assert len(found.embeddings) == 2 and found.prompt_eval_count == v1.usage.prompt_tokens
    assert all(np.allclose(a, b.embedding, atol=1e-6) for a, b in zip(found.embeddings, v1.data, strict=True))
    legacy = client.embeddings(model=model, prompt=TEXTS[0])
    assert np.allclose(legacy.embedding, found.embeddings[0], atol=1e-6)
    with pytest.raises(ollama.ResponseError) as refused:
        client.embed(model=model, input="")
    assert refused.value.status_code == 400 and "empty" in refused.value.error


def test_a_batch_of_embedding_lines(on_the_head, web_server, bob):
    client = client_for(web_server, bob)
    data = "".join(json.dumps({"custom_id": f"e{n}", "method": "POST", "url": "/v1/embeddings",
                               "body": {"input": text}}) + "\n" for n, text in enumerate(TEXTS[:2])).encode()
    data += json.dumps({"custom_id": "bad", "method": "POST", "url": "/v1/embeddings", "body": {"input": ""}}).encode()
    batch = client.batches.create(input_file_id=client.files.create(file=("e.jsonl", data), purpose="batch").id,
                                  endpoint="/v1/embeddings", completion_window="24h")
    done = client.batches.retrieve(batch.id)
    for _ in range(600):
        if done.status == "completed":
            break
        threading.Event().wait(0.2)
        done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts.completed == 2 and done.request_counts.failed == 1
    output = [json.loads(line) for line in client.files.content(done.output_file_id).text.splitlines()]
    alone = client.embeddings.create(model=on_the_head.model.name, input=TEXTS[0], encoding_format="float")
    assert [line["custom_id"] for line in output] == ["e0", "e1"]
    assert np.allclose(output[0]["response"]["body"]["data"][0]["embedding"], alone.data[0].embedding, atol=1e-6)
    errors = client.files.content(done.error_file_id).text
    assert "empty" in errors


def test_the_model_page_says_how_vectors_are_made(alice):
    model = ensure_bundled()
    page = Client()
    page.force_login(alice)
    shown = page.get(f"/models/{model.name}/").content.decode()
    assert "mean of its last layer" in shown and f"{model.n_embd} numbers" in shown
