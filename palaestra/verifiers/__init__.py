"""Reward functions usable on their own, without any env."""
