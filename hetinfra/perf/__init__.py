"""Performance model: max request rate of a layout for a request class under an SLO."""
