"""Policies: turn (task, history, screenshots) into a proposed action.

Profiles own the prompt, the output parser and the coordinate convention; backends run the model
(in-process with transformers, or over an OpenAI-compatible HTTP API). This package imports
`automation` for data types only (actions, coordinates, frames) and never imports Qt.
"""
