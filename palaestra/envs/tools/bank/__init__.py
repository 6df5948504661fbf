"""The bank domain: identity checks, accounts, transfers, cards, disputes and contact details."""

from palaestra.envs.tools.bank.backend import Bank

__all__ = ["Bank"]
