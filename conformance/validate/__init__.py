"""Validation of an implementation's own logs against the model: observations read, searched, linked."""
