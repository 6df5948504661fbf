"""People and places the domains' databases draw from: names, addresses."""

from __future__ import annotations

import numpy as np
import pydantic

from palaestra.envs.tools.backend import pick

FIRST_NAMES = (
    "Ava", "Liam", "Mia", "Noah", "Emma", "Omar", "Sofia", "Yuki", "Lucas", "Amara", "Ivan",
    "Chloe", "Mateo", "Priya", "Ethan", "Lena", "Kofi", "Isla", "Ravi", "Nora",
)  # fmt: skip
LAST_NAMES = (
    "Garcia", "Kim", "Novak", "Okafor", "Silva", "Muller", "Tanaka", "Rossi", "Khan", "Dubois",
    "Larsen", "Moreau", "Costa", "Singh", "Walsh", "Petrov", "Haddad", "Jensen",
)  # fmt: skip
CITIES = (
    ("Austin", "TX", "787"), ("Denver", "CO", "802"), ("Portland", "OR", "972"),
    ("Boston", "MA", "021"), ("Chicago", "IL", "606"), ("Seattle", "WA", "981"),
)  # fmt: skip
STREETS = ("Oak St", "Maple Ave", "Pine Rd", "Cedar Ln", "Elm St", "Lake Dr", "Hill Rd")


class Address(pydantic.BaseModel):
    street: str
    city: str
    state: str
    zip: str


def random_address(rng: np.random.Generator) -> Address:
    city, state, prefix = pick(rng, CITIES)
    street = f"{int(rng.integers(1, 999))} {pick(rng, STREETS)}"
    return Address(
        street=street, city=city, state=state, zip=f"{prefix}{int(rng.integers(10, 99))}"
    )
