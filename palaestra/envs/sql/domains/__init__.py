"""The synthetic domains of the SQL family, one module each: schema, data, questions."""

from __future__ import annotations

from types import ModuleType

from palaestra.envs.sql.domains import flights, hospital, library, school, shop

DOMAINS: dict[str, ModuleType] = {
    "shop": shop,
    "school": school,
    "flights": flights,
    "hospital": hospital,
    "library": library,
}
"""Domain name -> its module (``SCHEMA``, ``build(connection, gen)``, ``INTENTS``)."""
