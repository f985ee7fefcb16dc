"""Analyses over NEM IR (happens-before, capacity): read the IR, never rewrite it."""
