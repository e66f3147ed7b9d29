"""What agents do: provenance, sessions, rate limits, reads and the dashboard's feed."""
