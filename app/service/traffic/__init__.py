"""The traffic loop: the prediction log, outcomes, monitoring, refits and the live gauges."""
