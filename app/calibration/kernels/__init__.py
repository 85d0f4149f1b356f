"""Shared numerics below methods and measures: Newton's method, pooling of ties, knots,
weights, cross-validation, bounds, budgets and batch checks."""
