"""The tagging team's agents: each module holds its result type, parser and agent factory; the
Jinja2 templates (``<name>.en.j2``, ``<name>.zh.j2``) sit beside it."""
