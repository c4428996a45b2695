"""The registry of generating teams: name -> :class:`~pipelines.agents.team_interface.Team`.

It sits above the teams (it imports each) and below evaluation and the stages, which look a team up
here (``stages.merge_shards --team NAME`` offers every registered name). A fourth team adds one line
below, or, from code that is not part of the package (a test, a plugin), calls ``register(team)``::

    from pipelines import teams
    teams.register(MyTeam())
    teams.get("my_team").generate(cfgs)
"""

from __future__ import annotations

from pipelines.agents.team_interface import Team
from pipelines.kgc.interface import TEAM as KGC
from pipelines.ram2c.interface import TEAM as RAM2C
from pipelines.strict import did_you_mean
from pipelines.tagging.interface import TEAM as TAGGING

_REGISTRY: dict[str, Team] = {}


def register(team: Team) -> Team:
    """Add ``team`` under ``team.name``; ValueError when another team holds the name. Returns it."""
    held = _REGISTRY.get(team.name)
    if held is not None and held is not team:
        raise ValueError(f"a team named {team.name!r} is registered already ({type(held).__name__}); pick another name")
    _REGISTRY[team.name] = team
    return team


def get(name: str) -> Team:
    """The team registered as ``name``; KeyError naming the registered ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no team {name!r}{did_you_mean(name, names())}; registered: {', '.join(names())}") from None


def names() -> list[str]:
    """The registered team names, in registration order."""
    return list(_REGISTRY)


for _team in (TAGGING, KGC, RAM2C):
    register(_team)
