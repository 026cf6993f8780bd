"""Kept for old imports: the boundary-agreement reward lives in litseg.training.rewards.boundary."""

from litseg.training.rewards.boundary import boundary_factory, make_boundary_reward

__all__ = ["boundary_factory", "make_boundary_reward"]
