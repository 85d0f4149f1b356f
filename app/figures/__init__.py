"""Figures, matplotlib only: a report in, PNG or SVG bytes out."""
