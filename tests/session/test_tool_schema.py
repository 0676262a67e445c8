"""`@tool` schemas from type hints and docstrings: the exact JSON a provider receives, and a model's
call reaching the function with its arguments converted to the declared types."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from sessionmem.messages import ToolCall
from sessionmem.model.litellm import LiteLLMModel
from sessionmem.tools.define import dispatch, tool, tool_map
from sessionmem.tools.json_schema import ToolSchemaError, parse_docstring
from tests.scenarios.harness import make_runner, small_config
from tests.support.openai_server import OpenAIServer, text_reply, tool_call_reply

BIG = small_config(window=100_000, keep=60)


class Unit(enum.Enum):
    METRIC = "metric"
    IMPERIAL = "imperial"


@dataclass
class Item:
    """A line of the order.

    Attributes:
        sku: The product code.
        qty: How many.
    """

    sku: str
    qty: int = 1


class Address(BaseModel):
    street: str = Field(description="Street and number.")
    city: str
    zip: str | None = None


received: list[dict[str, Any]] = []


@tool
def place_order(
    items: list[Item],
    unit: Unit,
    speed: Literal["fast", "cheap"] = "cheap",
    ship_to: Address | None = None,
    related: list[int] | None = None,
    note: str | None = None,
) -> str:
    """Place an order for the user.

    Args:
        items: What to order,
            one entry per product.
        unit (Unit): Units for weights.
        speed: Delivery speed.
        ship_to: Where to send it.
        related: Ids of related orders.

    Returns:
        The order's id.
    """
    received.append(
        {"items": items, "unit": unit, "speed": speed, "ship_to": ship_to, "related": related, "note": note}
    )
    return "order-1"


PLACE_ORDER_SCHEMA = {
    "type": "function",
    "function": {
        "name": "place_order",
        "description": "Place an order for the user.",
        "parameters": {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "sku": {"type": "string", "description": "The product code."},
                            "qty": {"type": "integer", "description": "How many."},
                        },
                        "required": ["sku"],
                        "description": "A line of the order.",
                        "additionalProperties": False,
                    },
                    "description": "What to order, one entry per product.",
                },
                "unit": {
                    "type": "string",
                    "enum": ["metric", "imperial"],
                    "description": "Units for weights.",
                },
                "speed": {"type": "string", "enum": ["fast", "cheap"], "description": "Delivery speed."},
                "ship_to": {
                    "type": "object",
                    "properties": {
                        "street": {"type": "string", "description": "Street and number."},
                        "city": {"type": "string"},
                        "zip": {"type": "string"},
                    },
                    "required": ["street", "city"],
                    "description": "Where to send it.",
                },
                "related": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "Ids of related orders.",
                },
                "note": {"type": "string"},
            },
            "required": ["items", "unit"],
        },
    },
}


def test_the_schema_is_built_from_type_hints_and_the_args_section() -> None:
    assert place_order.schema() == PLACE_ORDER_SCHEMA


def test_a_models_call_reaches_the_function_with_converted_arguments(
    openai_server: OpenAIServer, tmp_path: Path, workspace: Path
) -> None:
    """Over a real provider round trip: the schema goes out as is, the JSON arguments come back typed."""
    received.clear()
    arguments = {
        "items": [{"sku": "tea-01", "qty": 3}, {"sku": "mug-02"}],
        "unit": "metric",
        "ship_to": {"street": "1 Rua Augusta", "city": "Lisbon"},
        "related": [7, 9],
    }
    openai_server.chat.push(tool_call_reply([("place_order", arguments)]))
    openai_server.chat.push(text_reply("Ordered."))
    model = LiteLLMModel(
        "openai/test-model", api_base=openai_server.base_url, api_key="sk-test", num_retries=0
    )
    runner, _ = make_runner(model, tmp_path, workspace, BIG, tools=[place_order])

    assert runner.open().run_turn_sync("order three teas and a mug").reply == "Ordered."

    sent = openai_server.chat.requests[0].body["tools"]
    assert [t for t in sent if t["function"]["name"] == "place_order"] == [PLACE_ORDER_SCHEMA]
    assert received == [
        {
            "items": [Item("tea-01", 3), Item("mug-02", 1)],
            "unit": Unit.METRIC,
            "speed": "cheap",
            "ship_to": Address(street="1 Rua Augusta", city="Lisbon"),
            "related": [7, 9],
            "note": None,  # optional and not sent: None, not a missing-argument error
        }
    ]
    tool_result = openai_server.chat.requests[1].body["messages"][-1]
    assert tool_result["role"] == "tool" and tool_result["content"] == "order-1"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"items": [], "unit": "kelvin"}, "unit: 'kelvin' is not one of 'metric', 'imperial'"),
        ({"items": [], "unit": "metric", "speed": "slow"}, "speed: 'slow' is not one of 'fast', 'cheap'"),
        ({"items": [{"sku": "a", "colour": "red"}], "unit": "metric"}, "items[0]: unknown field(s) 'colour'"),
        ({"items": [{"qty": 2}], "unit": "metric"}, "items[0]: missing required field(s) 'sku'"),
        ({"items": [], "unit": "metric", "ship_to": {"street": "x"}}, "ship_to: city: Field required"),
    ],
)
def test_arguments_that_do_not_fit_go_back_to_the_model_and_the_function_is_not_called(
    arguments: dict[str, Any], problem: str
) -> None:
    received.clear()
    outcome = asyncio.run(dispatch(tool_map([place_order]), ToolCall("1", "place_order", arguments)))
    assert outcome.is_error
    assert outcome.content.startswith("Invalid arguments for place_order: ")
    assert problem in outcome.content
    assert received == []


def test_numpy_style_parameters_and_annotated_descriptions() -> None:
    @tool
    def convert(amount: float, currency: Annotated[str, "ISO 4217 code"], rounding: int = 2) -> str:
        """Convert an amount.

        Longer explanation that stays in the description.

        Parameters
        ----------
        amount : float
            How much, in the
            source currency.
        rounding : int
            Decimal places.

        Returns
        -------
        str
        """
        return ""

    assert convert.description == "Convert an amount.\n\nLonger explanation that stays in the description."
    assert convert.parameters == {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "description": "How much, in the source currency."},
            "currency": {"type": "string", "description": "ISO 4217 code"},
            "rounding": {"type": "integer", "description": "Decimal places."},
        },
        "required": ["amount", "currency"],
    }
    assert convert.convert is None  # nothing to convert: the JSON values go through as sent


def test_unions_sets_tuples_and_mappings() -> None:
    @tool
    def tag(labels: set[str], weights: dict[str, float], pair: tuple[int, ...], key: int | str) -> str:
        """Tag things."""
        return ""

    assert tag.parameters["properties"] == {
        "labels": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "weights": {"type": "object", "additionalProperties": {"type": "number"}},
        "pair": {"type": "array", "items": {"type": "integer"}},
        "key": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    }
    assert tag.convert is not None
    converted = tag.convert({"labels": ["a", "b", "a"], "weights": {"x": 1.0}, "pair": [1, 2], "key": 3})
    assert converted == {"labels": {"a", "b"}, "weights": {"x": 1.0}, "pair": (1, 2), "key": 3}


class Opaque:
    pass


@dataclass
class Node:
    child: Node | None = None


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        (datetime, "tool 'bad', parameter 'value': unsupported type datetime: it has no JSON schema"),
        (Opaque, "tool 'bad', parameter 'value': unsupported type Opaque"),
        (tuple[int, str], "fixed-length tuples have no portable schema"),
        (dict[int, str], "JSON object keys are strings"),
        (list[Opaque], "parameter 'value': unsupported type Opaque"),
        (Node, "recursive types cannot be described"),
    ],
)
def test_an_unsupported_annotation_fails_when_the_tool_is_made(annotation: Any, problem: str) -> None:
    def bad(value: Any) -> str:
        return ""

    bad.__annotations__["value"] = annotation
    with pytest.raises(ToolSchemaError) as error:
        tool(bad)
    assert problem in str(error.value)


def test_google_docstring_sections_end_where_the_next_begins() -> None:
    summary, params = parse_docstring(
        """Fetch a page.

        Args:
            url: The address.
            timeout (float, optional): Seconds to wait
                before giving up.

        Raises:
            TimeoutError: never described as a parameter.
        """
    )
    assert summary == "Fetch a page."
    assert params == {"url": "The address.", "timeout": "Seconds to wait before giving up."}
