"""JSON Schema files for the published report formats."""
