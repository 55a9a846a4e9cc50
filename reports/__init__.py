"""Report models and renderers; no hardware access here."""
