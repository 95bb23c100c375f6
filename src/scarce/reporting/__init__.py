"""Tables and figures built from results (rich and matplotlib are imported where used)."""
