"""One request value: every surface parses its own spelling into a ReminderSpec, which
the reminders API takes (and checks) once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from remindkit.agent.actions import reminder_spec as tag_spec
from remindkit.agent.context import ToolContext
from remindkit.agent.tools import reminder_spec as tool_spec
from remindkit.api.schema import input_models
from remindkit.api.schema import reminder_spec as body_spec
from remindkit.cli.main import build_parser
from remindkit.cli.reminders import reminder_spec as cli_spec
from remindkit.clock import FakeClock
from remindkit.errors import InvalidSchedule
from remindkit.models import ReminderSpec, Source
from remindkit.protocol import parse_tags
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore

# "stretch", in 5 minutes, labelled, in Berlin time, repeating every hour 3 times
WANT = ReminderSpec(
    "stretch", session="s1", label="legs", every="1h", tz="Europe/Berlin", repeat="3"
)


@pytest.fixture
def api(store: SqlStore, clock: FakeClock, settings: Settings) -> Reminders:
    return Reminders(store, clock=clock, settings=settings)


def _same(got: ReminderSpec, source: Source) -> None:
    """The request WANT, as a surface spells it: only its source and words differ."""
    assert replace(got, source=Source.API, words=None, repeat=str(got.repeat)) == WANT
    assert got.source is source


def test_each_surface_parses_its_spelling_into_the_same_request(
    api: Reminders, settings: Settings
) -> None:
    args = build_parser("remind").parse_args(
        ["remind", "stretch", "--session", "s1", "--label", "legs", "--every", "1h"]
        + ["--tz", "Europe/Berlin", "--repeat", "3"]
    )
    _same(cli_spec(args), Source.CLI)
    body_model, _ = input_models(settings.limits)
    body = body_model.model_validate(
        {"prompt": "stretch", "name": "legs", "every": "1h", "timezone": "Europe/Berlin"}
        | {"repeat": "3"}
    )
    got = body_spec(body, session="s1", project="default")
    _same(replace(got, project=None), Source.HTTP)
    tool = tool_spec(
        ToolContext(api, "s1"),
        {"prompt": "stretch", "label": "legs", "every": "1h", "time_zone": "Europe/Berlin"}
        | {"repeat": "3"},
    )
    assert isinstance(tool, ReminderSpec)
    _same(tool, Source.TOOL)
    (tag,) = parse_tags(
        '<schedule label="legs" every="1h" tz="Europe/Berlin" repeat="3">stretch</schedule>'
    ).commands
    _same(tag_spec(tag, "s1"), Source.TAG)  # type: ignore[arg-type]


def test_add_takes_the_request_or_its_keywords_not_both(api: Reminders) -> None:
    by_spec = api.add(WANT).reminder
    by_keywords = api.add(
        "stretch", session="s1", every="1h", tz="Europe/Berlin", repeat=3
    ).reminder
    assert by_spec.schedule.describe() == by_keywords.schedule.describe()
    assert by_spec.label == "legs" and by_keywords.label is None
    with pytest.raises(TypeError):
        api.add(WANT, label="other")


def test_the_api_words_its_refusals_as_the_surface_spells_them(api: Reminders) -> None:
    """A schedule refused for the tools names after / at / every / cron, for the HTTP
    API the body's fields, for the command line (and Python) its flags."""
    cases = [
        (None, "say when: give --in, --at, --every or --cron"),
        ({"in": "after", "at": "at", "every": "every", "cron": "cron"}, "give after, at, every"),
        ({"in": '"in"', "at": '"at"'}, 'say when: give "in", "at"'),
    ]
    for words, said in cases:
        with pytest.raises(InvalidSchedule) as exc:
            api.add(ReminderSpec("x", session="s1", words=words))
        assert exc.value.code == "missing_schedule" and said in exc.value.message
