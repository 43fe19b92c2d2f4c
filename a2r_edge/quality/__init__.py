"""Quality measures of conversions (artefacts: no-reference measures against the input)."""
