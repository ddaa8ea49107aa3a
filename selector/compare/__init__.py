"""Two answers side by side: two engine versions; the tool and a start-up log."""
