"""Re-planning from cron: diff, safe change, demand from observations."""
