"""The clients agents are built with, unchanged, against /v1: langchain-openai's bind_tools (each tool_choice a
call comes back for) and with_structured_output (a pydantic model filled), and the openai-agents SDK's agent over
the Responses API calling a Python function tool and answering with its result; instructor filling a nested
model through a tool call and through JSON mode with its schema (its plain JSON mode holds the answer only to "an
object", the schema left to the model to read: docs/clients.md); the `llm` CLI answering, and filling a schema."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from clusterpanel.accounts.models import ApiToken

pytestmark = pytest.mark.timeout(300)


class City(BaseModel):
    name: str = Field(max_length=30)
    country: str = Field(max_length=30)


def get_weather(city: str) -> str:
    """The weather now in a city."""
    return f"21 C and clear in {city}"


@pytest.fixture
def chat_model(on_the_head, web_server, bob):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=on_the_head.model.name, base_url=f"{web_server}/v1", temperature=0, max_tokens=200,
                      api_key=ApiToken.issue(bob, "langchain")[1], max_retries=0)


def test_langchain_bind_tools_and_structured_output(chat_model):
    called = chat_model.bind_tools([get_weather], tool_choice="get_weather").invoke("Weather in Paris?")
    assert [call["name"] for call in called.tool_calls] == ["get_weather"]
    assert isinstance(called.tool_calls[0]["args"]["city"], str)
    city = chat_model.with_structured_output(City, method="json_schema").invoke("Name a city in France.")
    assert isinstance(city, City) and city.name


def test_an_openai_agents_agent_calls_a_python_tool_and_answers_with_its_result(on_the_head, web_server, bob):
    from agents import Agent, ModelSettings, OpenAIResponsesModel, RunConfig, Runner, function_tool
    from openai import AsyncOpenAI

    seen = []

    @function_tool
    def weather(city: str) -> str:
        """The weather now in a city."""
        seen.append(city)
        return f"21 C and clear in {city}"

    client = AsyncOpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(bob, "agents")[1], max_retries=0)
    agent = Agent(name="forecaster", instructions="Answer with the weather the tool gives.", tools=[weather],
                  model=OpenAIResponsesModel(model=on_the_head.model.name, openai_client=client),
                  model_settings=ModelSettings(temperature=0, max_tokens=200, tool_choice="required"),
                  reset_tool_choice=True)
    result = Runner.run_sync(agent, "What is the weather in Paris?", max_turns=4,
                             run_config=RunConfig(tracing_disabled=True))
    assert seen and isinstance(seen[0], str), "the agent ran the Python tool"
    assert result.final_output, "and answered after its result"


class Trip(BaseModel):
    city: City
    days: int = Field(ge=1, le=14)


@pytest.mark.parametrize("mode", ["TOOLS", "JSON_SCHEMA"])
def test_instructor_fills_a_nested_model_with_tools_or_json(on_the_head, web_server, bob, mode):
    import instructor
    from openai import OpenAI

    client = instructor.from_openai(
        OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(bob, "instructor")[1], max_retries=0),
        mode=getattr(instructor.Mode, mode))
    trip = client.chat.completions.create(model=on_the_head.model.name, response_model=Trip, max_retries=0,
                                          temperature=0, max_tokens=200,
                                          messages=[{"role": "user", "content": "Plan a trip to a city in Italy."}])
    assert isinstance(trip, Trip) and isinstance(trip.city, City) and 1 <= trip.days <= 14


def test_the_llm_cli_answers_and_fills_a_schema(on_the_head, web_server, bob, tmp_path):
    (tmp_path / "extra-openai-models.yaml").write_text(
        f"- model_id: panel\n  model_name: {on_the_head.model.name}\n  api_base: {web_server}/v1\n"
        "  api_key_name: panel\n  supports_schema: true\n")
    (tmp_path / "keys.json").write_text(json.dumps({"panel": ApiToken.issue(bob, "llm")[1]}))
    llm = [str(Path(sys.executable).parent / "llm"), "-m", "panel", "-o", "temperature", "0", "--no-log"]
    env = {**os.environ, "LLM_USER_PATH": str(tmp_path)}
    said = subprocess.run([*llm, "Name three colours."], capture_output=True, text=True, env=env, timeout=120)
    assert said.returncode == 0 and said.stdout.strip(), said.stderr
    filled = subprocess.run([*llm, "--schema", "name, age int", "Invent a person."], capture_output=True,
                            text=True, env=env, timeout=120)
    assert filled.returncode == 0, filled.stderr
    person = json.loads(filled.stdout)
    assert isinstance(person["name"], str) and isinstance(person["age"], int)
