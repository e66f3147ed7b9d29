"""Dashboard widgets; each renders from ``DashboardState`` and never touches the DB."""
