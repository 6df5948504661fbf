"""The shop domain: orders, cancellations, returns, exchanges and addresses."""

from palaestra.envs.tools.shop.backend import Shop

__all__ = ["Shop"]
